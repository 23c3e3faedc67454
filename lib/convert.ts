// Conversions between the wire objects (protobuf-es) and the agent's own types. The only place in
// the core that knows the wire format.
import { create } from '@bufbuild/protobuf';
import * as pb from '../proto/gen/ank_base_pb.js';
import * as grpc from '../proto/gen/grpc_api_pb.js';
import { ExecutionState } from './execution-state.js';
import type { FromServer, ToServer, WireResponse, WorkloadState } from './messages.js';
import type {
  AccessRule, AddCondition, ControlInterfaceAccess, DeleteCondition, DeletedWorkload, ReadWrite, RestartPolicy,
  WorkloadFile, WorkloadInstanceName, WorkloadSpec,
} from './workload.js';

const ADD_CONDITIONS: Record<pb.AddCondition, AddCondition> = {
  [pb.AddCondition.ADD_COND_RUNNING]: 'Running',
  [pb.AddCondition.ADD_COND_SUCCEEDED]: 'Succeeded',
  [pb.AddCondition.ADD_COND_FAILED]: 'Failed',
};
const DELETE_CONDITIONS: Record<grpc.DeleteCondition, DeleteCondition> = {
  [grpc.DeleteCondition.DEL_COND_RUNNING]: 'Running',
  [grpc.DeleteCondition.DEL_COND_NOT_PENDING_NOR_RUNNING]: 'NotPendingNorRunning',
};
const RESTART_POLICIES: Record<pb.RestartPolicy, RestartPolicy> = {
  [pb.RestartPolicy.NEVER]: 'Never',
  [pb.RestartPolicy.ON_FAILURE]: 'OnFailure',
  [pb.RestartPolicy.ALWAYS]: 'Always',
};
const READ_WRITE: Record<pb.ReadWriteEnum, ReadWrite> = {
  [pb.ReadWriteEnum.RW_NOTHING]: 'Nothing',
  [pb.ReadWriteEnum.RW_READ]: 'Read',
  [pb.ReadWriteEnum.RW_WRITE]: 'Write',
  [pb.ReadWriteEnum.RW_READ_WRITE]: 'ReadWrite',
};

/** A message the agent cannot use; the text says why. */
export class MalformedMessage extends Error {}

export function instanceNameFrom(n: pb.WorkloadInstanceName | undefined): WorkloadInstanceName {
  if (!n || !n.workloadName || !n.agentName) throw new MalformedMessage('a workload instance name without workload or agent name');
  return { workloadName: n.workloadName, agentName: n.agentName, id: n.id };
}

export const instanceNameTo = (n: WorkloadInstanceName): pb.WorkloadInstanceName => create(pb.WorkloadInstanceNameSchema, n);

function accessRuleFrom(rule: pb.AccessRightsRule): AccessRule[] {
  const r = rule.AccessRightsRuleEnum;
  if (r.case === 'stateRule') return [{ kind: 'state', operation: READ_WRITE[r.value.operation] ?? 'Nothing', filterMasks: r.value.filterMasks }];
  if (r.case === 'logRule') return [{ kind: 'log', workloadNames: r.value.workloadNames }];
  return [];
}

export function accessFrom(a: pb.ControlInterfaceAccess | undefined): ControlInterfaceAccess {
  return { allowRules: (a?.allowRules ?? []).flatMap(accessRuleFrom), denyRules: (a?.denyRules ?? []).flatMap(accessRuleFrom) };
}

function filesFrom(files: pb.Files | undefined): WorkloadFile[] {
  return (files?.files ?? []).map((f) => f.FileContent.case === 'binaryData'
    ? { mountPoint: f.mountPoint, binaryData: f.FileContent.value }
    : { mountPoint: f.mountPoint, data: f.FileContent.value ?? '' });
}

export function workloadSpecFrom(added: grpc.AddedWorkload): WorkloadSpec {
  const w = added.workload;
  const dependencies: Record<string, AddCondition> = {};
  for (const [name, c] of Object.entries(w?.dependencies?.dependencies ?? {})) {
    const condition = ADD_CONDITIONS[c];
    if (!condition) throw new MalformedMessage(`an unknown add condition ${c} for dependency '${name}'`);
    dependencies[name] = condition;
  }
  return {
    instanceName: instanceNameFrom(added.instanceName),
    runtime: w?.runtime ?? '',
    runtimeConfig: w?.runtimeConfig ?? '',
    restartPolicy: RESTART_POLICIES[w?.restartPolicy ?? pb.RestartPolicy.NEVER] ?? 'Never',
    dependencies,
    tags: { ...(w?.tags?.tags ?? {}) },
    controlInterfaceAccess: accessFrom(w?.controlInterfaceAccess),
    files: filesFrom(w?.files),
  };
}

export function deletedWorkloadFrom(d: grpc.DeletedWorkload): DeletedWorkload {
  const dependencies: Record<string, DeleteCondition> = {};
  for (const [name, c] of Object.entries(d.dependencies)) {
    const condition = DELETE_CONDITIONS[c];
    if (!condition) throw new MalformedMessage(`an unknown delete condition ${c} for dependent '${name}'`);
    dependencies[name] = condition;
  }
  return { instanceName: instanceNameFrom(d.instanceName), dependencies };
}

// ---- execution states -------------------------------------------------------------------------

type Case = pb.ExecutionState['ExecutionStateEnum']['case'] & string;
const CASES: Record<ExecutionState['state'], Case> = {
  AgentDisconnected: 'agentDisconnected', Pending: 'pending', Running: 'running', Stopping: 'stopping',
  Succeeded: 'succeeded', Failed: 'failed', NotScheduled: 'notScheduled', Removed: 'removed',
};
const SUBSTATES: Record<Case, Record<number, string>> = {
  agentDisconnected: { 0: 'AgentDisconnected' },
  pending: { 0: 'Initial', 1: 'WaitingToStart', 2: 'Starting', 8: 'StartingFailed' },
  running: { 0: 'Ok' },
  stopping: { 0: 'Stopping', 1: 'WaitingToStop', 2: 'RequestedAtRuntime', 8: 'DeleteFailed' },
  succeeded: { 0: 'Ok' },
  failed: { 0: 'ExecFailed', 1: 'Unknown', 2: 'Lost' },
  notScheduled: { 0: 'NotScheduled' },
  removed: { 0: 'Removed' },
};

export function executionStateTo(s: ExecutionState): pb.ExecutionState {
  const c = CASES[s.state];
  const value = Number(Object.entries(SUBSTATES[c]).find(([, name]) => name === s.substate)![0]);
  return create(pb.ExecutionStateSchema, {
    additionalInfo: s.additionalInfo,
    ExecutionStateEnum: { case: c, value } as pb.ExecutionState['ExecutionStateEnum'],
  });
}

export function executionStateFrom(s: pb.ExecutionState | undefined): ExecutionState | undefined {
  const e = s?.ExecutionStateEnum;
  if (!e?.case) return undefined;
  const substate = SUBSTATES[e.case][e.value];
  if (!substate) return undefined;
  const state = (Object.keys(CASES) as ExecutionState['state'][]).find((k) => CASES[k] === e.case)!;
  return { state, substate, additionalInfo: s?.additionalInfo ?? '' } as ExecutionState;
}

export const workloadStateTo = (s: WorkloadState): pb.WorkloadState =>
  create(pb.WorkloadStateSchema, { instanceName: instanceNameTo(s.instanceName), executionState: executionStateTo(s.executionState) });

/** Empty or unreadable states are left out (swdd~agent-stores-workload-states-of-its-workloads~1). */
function workloadStatesFrom(states: readonly pb.WorkloadState[]): WorkloadState[] {
  return states.flatMap((s) => {
    const executionState = executionStateFrom(s.executionState);
    if (!executionState || !s.instanceName?.workloadName) return [];
    return [{ instanceName: instanceNameFrom(s.instanceName), executionState }];
  });
}

// ---- whole messages ---------------------------------------------------------------------------

/** A FromServer message the core understands; undefined for kinds it does not handle. Throws MalformedMessage. */
export function fromServerMessage(m: grpc.FromServer): FromServer | undefined {
  const e = m.FromServerEnum;
  switch (e.case) {
    case 'serverHello':
      return { kind: 'serverHello', added: e.value.addedWorkloads.map(workloadSpecFrom) };
    case 'updateWorkload':
      return {
        kind: 'updateWorkload',
        added: e.value.addedWorkloads.map(workloadSpecFrom),
        deleted: e.value.deletedWorkloads.map(deletedWorkloadFrom),
      };
    case 'updateWorkloadState':
      return { kind: 'updateWorkloadState', states: workloadStatesFrom(e.value.workloadStates) };
    case 'response':
      return { kind: 'response', response: e.value as WireResponse };
    case 'logsRequest': {
      const r = e.value.logsRequest;
      const tail = r?.tail;
      return {
        kind: 'logsRequest',
        requestId: e.value.requestId,
        workloads: (r?.workloadNames ?? []).map(instanceNameFrom),
        options: { follow: r?.follow ?? false, tail: tail === undefined || tail < 0 ? undefined : tail, since: r?.since || undefined, until: r?.until || undefined },
      };
    }
    case 'logsCancelRequest':
      return { kind: 'logsCancelRequest', requestId: e.value.requestId };
    default:
      return undefined;
  }
}

export function toServerMessage(m: ToServer): grpc.ToServer {
  switch (m.kind) {
    case 'updateWorkloadState':
      return create(grpc.ToServerSchema, {
        ToServerEnum: { case: 'updateWorkloadState', value: { workloadStates: m.states.map(workloadStateTo) } },
      });
    case 'request':
      return create(grpc.ToServerSchema, { ToServerEnum: { case: 'request', value: m.request as pb.Request } });
    case 'goodbye':
      return create(grpc.ToServerSchema, { ToServerEnum: { case: 'goodbye', value: {} } });
    case 'logEntries':
      return create(grpc.ToServerSchema, { ToServerEnum: { case: 'logEntriesResponse', value: {
        requestId: m.requestId,
        logEntriesResponse: { logEntries: m.entries.map((e) => ({ workloadName: instanceNameTo(e.instanceName), message: e.message })) },
      } } });
    case 'logsStop':
      return create(grpc.ToServerSchema, { ToServerEnum: { case: 'logsStopResponse', value: {
        requestId: m.requestId, logsStopResponse: { workloadName: instanceNameTo(m.instanceName) },
      } } });
    case 'agentLoadStatus':
      return create(grpc.ToServerSchema, {
        ToServerEnum: { case: 'AgentLoadStatus', value: { agentName: m.agentName, cpuUsage: { cpuUsage: m.cpuUsage }, freeMemory: { freeMemory: BigInt(m.freeMemory) } } },
      });
  }
}

export const agentHello = (agentName: string, protocolVersion: string): grpc.ToServer =>
  create(grpc.ToServerSchema, { ToServerEnum: { case: 'agentHello', value: { agentName, protocolVersion } } });
