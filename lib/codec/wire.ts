// The wire codec: protobuf-es objects ↔ the agent's domain types. The only place in the core that
// knows the wire format of the server connection.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type * as pb from '../../proto/gen/ank_base_pb.js';
import type * as grpc from '../../proto/gen/grpc_api_pb.js';
import { ankBase, grpcApi } from './descriptors.cjs';
import type { CompleteState } from '../complete-state.js';
import type { ExecutionState } from '../execution-state.js';
import type { FromServer, ToServer, WireResponse, WorkloadState } from '../messages.js';
import type {
  AccessRule,
  AddCondition,
  ConfigValue,
  ControlInterfaceAccess,
  DeleteCondition,
  DeletedWorkload,
  Workload,
  WorkloadFile,
  WorkloadInstanceName,
  WorkloadSpec,
} from '../workload.js';
import { encodeAgentLoadStatus } from './hello.js';
import { encodeLogEntries } from './log-entries.js';
import { encodeWorkloadStates } from './state-updates.js';
import { type WireWorkloadState, workloadStatesOf } from './workload-states.js';
import {
  type WireAccessRule,
  type WireAdded,
  type WireDeleted,
  type WireFile,
  type WireWorkload,
  type WireWorkloadUpdate,
  workloadUpdateOf,
} from './workload-updates.js';
import { ADD_CONDITION, DELETE_CONDITION, EXECUTION_STATE, READ_WRITE, RESTART_POLICY, wireExecutionState } from './tables.js';

/** A message the agent cannot use; the text says why. */
export class MalformedMessage extends Error {}

const mapValues = <A, B>(record: Readonly<Record<string, A>>, f: (a: A, key: string) => B): Record<string, B> =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, f(v, k)]));

// ---- instance names -----------------------------------------------------------------------------

/** An instance name; the agent name may be empty where the server speaks of workloads no agent runs (NotScheduled). */
export function instanceNameFrom(n: WireWorkloadState['instanceName'], { scheduled = true } = {}): WorkloadInstanceName {
  if (!n?.workloadName || (scheduled && !n.agentName))
    throw new MalformedMessage(`a workload instance name without ${n?.workloadName ? 'agent' : 'workload'} name`);
  return { workloadName: n.workloadName, agentName: n.agentName, id: n.id };
}

/** Decodes each element alone: one that is malformed is left out and reported, the others are kept. */
function eachOf<T, U>(items: readonly T[], decode: (item: T) => U, what: string, warn: (problem: string) => void): U[] {
  return items.flatMap((item) => {
    try {
      return [decode(item)];
    } catch (err) {
      if (!(err instanceof MalformedMessage)) throw err;
      warn(`${what} with ${err.message} was left out`);
      return [];
    }
  });
}

export const instanceNameTo = (n: WorkloadInstanceName): pb.WorkloadInstanceName => create(ankBase().WorkloadInstanceNameSchema, n);

// ---- workloads ----------------------------------------------------------------------------------

function accessRuleFrom(rule: WireAccessRule): AccessRule[] {
  const r = rule.AccessRightsRuleEnum;
  if (r.case === 'stateRule') return [{ kind: 'state', operation: READ_WRITE.fromWire(r.value.operation) ?? 'Nothing', filterMasks: r.value.filterMasks }];
  if (r.case === 'logRule') return [{ kind: 'log', workloadNames: r.value.workloadNames }];
  return [];
}

const accessRuleTo = (r: AccessRule): pb.AccessRightsRule =>
  create(ankBase().AccessRightsRuleSchema, {
    AccessRightsRuleEnum:
      r.kind === 'state'
        ? { case: 'stateRule', value: { operation: READ_WRITE.toWire(r.operation), filterMasks: [...r.filterMasks] } }
        : { case: 'logRule', value: { workloadNames: [...r.workloadNames] } },
  });

export function accessFrom(a: WireWorkload['controlInterfaceAccess']): ControlInterfaceAccess {
  return { allowRules: (a?.allowRules ?? []).flatMap(accessRuleFrom), denyRules: (a?.denyRules ?? []).flatMap(accessRuleFrom) };
}

const fileFrom = (f: WireFile): WorkloadFile =>
  f.FileContent.case === 'binaryData'
    ? { mountPoint: f.mountPoint, binaryData: f.FileContent.value }
    : { mountPoint: f.mountPoint, data: f.FileContent.value ?? '' };

const fileTo = (f: WorkloadFile): pb.File =>
  create(ankBase().FileSchema, {
    mountPoint: f.mountPoint,
    FileContent: f.binaryData !== undefined ? { case: 'binaryData', value: f.binaryData } : { case: 'data', value: f.data ?? '' },
  });

function addConditionFrom(c: number, name: string): AddCondition {
  const condition = ADD_CONDITION.fromWire(c);
  if (!condition) throw new MalformedMessage(`an unknown add condition ${c} for dependency '${name}'`);
  return condition;
}

/** A workload of the desired state (or of an AddedWorkload) in the domain's terms. */
export function workloadFrom(w: WireWorkload | undefined): Workload {
  return {
    agent: w?.agent ?? '',
    runtime: w?.runtime ?? '',
    runtimeConfig: w?.runtimeConfig ?? '',
    restartPolicy: RESTART_POLICY.fromWire(w?.restartPolicy ?? RESTART_POLICY.toWire('Never')) ?? 'Never',
    dependencies: mapValues(w?.dependencies?.dependencies ?? {}, addConditionFrom),
    tags: { ...(w?.tags?.tags ?? {}) },
    controlInterfaceAccess: accessFrom(w?.controlInterfaceAccess),
    configs: { ...(w?.configs?.configs ?? {}) },
    files: (w?.files?.files ?? []).map(fileFrom),
  };
}

/** A workload, or the parts of it a field mask picked, on the wire. */
export function workloadTo(w: Partial<Workload>): pb.Workload {
  return create(ankBase().WorkloadSchema, {
    agent: w.agent,
    runtime: w.runtime,
    runtimeConfig: w.runtimeConfig,
    restartPolicy: w.restartPolicy && RESTART_POLICY.toWire(w.restartPolicy),
    dependencies: w.dependencies && { dependencies: mapValues(w.dependencies, (c) => ADD_CONDITION.toWire(c)) },
    tags: w.tags && { tags: { ...w.tags } },
    controlInterfaceAccess: w.controlInterfaceAccess && {
      allowRules: w.controlInterfaceAccess.allowRules.map(accessRuleTo),
      denyRules: w.controlInterfaceAccess.denyRules.map(accessRuleTo),
    },
    configs: w.configs && { configs: { ...w.configs } },
    files: w.files && { files: w.files.map(fileTo) },
  });
}

export function workloadSpecFrom(added: WireAdded): WorkloadSpec {
  const { agent: _agent, configs: _configs, ...spec } = workloadFrom(added.workload);
  return { instanceName: instanceNameFrom(added.instanceName), ...spec };
}

/** An AddedWorkload as a server sends it. */
export function addedWorkloadTo(spec: WorkloadSpec): grpc.AddedWorkload {
  return create(grpcApi().AddedWorkloadSchema, {
    instanceName: instanceNameTo(spec.instanceName),
    workload: workloadTo({ ...spec, agent: spec.instanceName.agentName, configs: {} }),
  });
}

export function deletedWorkloadFrom(d: WireDeleted): DeletedWorkload {
  const dependencies = mapValues(d.dependencies, (c, name): DeleteCondition => {
    const condition = DELETE_CONDITION.fromWire(c);
    if (!condition) throw new MalformedMessage(`an unknown delete condition ${c} for dependent '${name}'`);
    return condition;
  });
  return { instanceName: instanceNameFrom(d.instanceName), dependencies };
}

// ---- execution states ---------------------------------------------------------------------------

export function executionStateTo(s: ExecutionState): pb.ExecutionState {
  return create(ankBase().ExecutionStateSchema, {
    additionalInfo: s.additionalInfo,
    ExecutionStateEnum: wireExecutionState(s) as pb.ExecutionState['ExecutionStateEnum'],
  });
}

/** The domain's state and substates of each state the wire names. */
const BY_CASE = new Map(Object.entries(EXECUTION_STATE).map(([state, row]) => [row.case as string, { state, substates: row.substates }]));

export function executionStateFrom(s: WireWorkloadState['executionState']): ExecutionState | undefined {
  const e = s?.ExecutionStateEnum;
  const row = e?.case === undefined ? undefined : BY_CASE.get(e.case);
  const substate = row?.substates[e!.value as number];
  return substate === undefined ? undefined : ({ state: row!.state, substate, additionalInfo: s?.additionalInfo ?? '' } as ExecutionState);
}

export const workloadStateTo = (s: WorkloadState): pb.WorkloadState =>
  create(ankBase().WorkloadStateSchema, { instanceName: instanceNameTo(s.instanceName), executionState: executionStateTo(s.executionState) });

/** A state of any workload, this agent's, another agent's or one no agent runs (an empty agent name). */
function workloadStateFrom(s: WireWorkloadState): WorkloadState {
  const executionState = executionStateFrom(s.executionState);
  if (!executionState) throw new MalformedMessage('an execution state the agent does not know');
  return { instanceName: instanceNameFrom(s.instanceName, { scheduled: false }), executionState };
}

// ---- the complete state -------------------------------------------------------------------------

function configItemTo(v: ConfigValue): pb.ConfigItem {
  if (typeof v === 'string') return create(ankBase().ConfigItemSchema, { ConfigItemEnum: { case: 'String', value: v } });
  if (Array.isArray(v)) return create(ankBase().ConfigItemSchema, { ConfigItemEnum: { case: 'array', value: { values: v.map(configItemTo) } } });
  return create(ankBase().ConfigItemSchema, { ConfigItemEnum: { case: 'object', value: { fields: mapValues(v, configItemTo) } } });
}

function configItemFrom(item: pb.ConfigItem): ConfigValue {
  const c = item.ConfigItemEnum;
  if (c.case === 'array') return c.value.values.map(configItemFrom);
  if (c.case === 'object') return mapValues(c.value.fields, configItemFrom);
  return c.value ?? '';
}

/** swdd~api-object-serialization~1: the (possibly masked) complete state on the wire. */
export function completeStateTo(s: CompleteState): pb.CompleteState {
  const d = s.desiredState;
  return create(ankBase().CompleteStateSchema, {
    desiredState: d && {
      apiVersion: d.apiVersion,
      workloads: d.workloads && { workloads: mapValues(d.workloads, workloadTo) },
      configs: d.configs && { configs: mapValues(d.configs, configItemTo) },
    },
    workloadStates: s.workloadStates && {
      agentStateMap: mapValues(s.workloadStates, (byName) => ({
        wlNameStateMap: mapValues(byName, (byId) => ({ idStateMap: mapValues(byId, executionStateTo) })),
      })),
    },
    agents: s.agents && { agents: mapValues(s.agents, () => ({})) },
  });
}

/** The desired state a workload sent in an UpdateStateRequest. Throws MalformedMessage. */
export function declaredStateFrom(s: pb.CompleteState | undefined): NonNullable<CompleteState['desiredState']> {
  const d = s?.desiredState;
  return {
    apiVersion: d?.apiVersion || undefined,
    workloads: mapValues(d?.workloads?.workloads ?? {}, workloadFrom),
    configs: mapValues(d?.configs?.configs ?? {}, configItemFrom),
  };
}

// ---- whole messages -----------------------------------------------------------------------------

/**
 * A FromServer message the core understands; undefined for kinds it does not handle. A malformed element
 * (a workload, a state, a name) is left out alone and `warn` hears why: never the whole message.
 */
/**
 * The server's message as the core takes it, from its bytes (as the protocol line reads them); what is
 * malformed in it is left out, and `warn` told, naming the message. Workload states, which a fleet sends by the
 * thousand, are read by hand (lib/codec/workload-states.ts); the rest by protobuf-es.
 */
export function fromServerBytes(bytes: Uint8Array, warn: (problem: string) => void = () => undefined): FromServer | undefined {
  const states = workloadStatesOf(bytes);
  if (states) return updateWorkloadStateFrom(states, (problem) => warn(`In a updateWorkloadState from the server, ${problem}.`));
  const update = workloadUpdateOf(bytes);
  if (update) return workloadUpdateFrom(update, (problem) => warn(`In a ${update.case} from the server, ${problem}.`));
  const m = fromBinary(grpcApi().FromServerSchema, bytes);
  return fromServerMessage(m, (problem) => warn(`In a ${m.FromServerEnum.case ?? 'message'} from the server, ${problem}.`));
}

/** swdd~agent-stores-workload-states-of-its-workloads~1: unreadable states are left out, one by one. */
const updateWorkloadStateFrom = (states: readonly WireWorkloadState[], warn: (problem: string) => void): FromServer => ({
  kind: 'updateWorkloadState',
  states: eachOf(states, workloadStateFrom, 'a workload state', warn),
});

/** A ServerHello's or an UpdateWorkload's workloads: malformed ones are left out, one by one. */
function workloadUpdateFrom(m: WireWorkloadUpdate, warn: (problem: string) => void): FromServer {
  const added = eachOf(m.addedWorkloads, workloadSpecFrom, 'a workload', warn);
  return m.case === 'serverHello'
    ? { kind: 'serverHello', added }
    : { kind: 'updateWorkload', added, deleted: eachOf(m.deletedWorkloads, deletedWorkloadFrom, 'a deleted workload', warn) };
}

export function fromServerMessage(m: grpc.FromServer, warn: (problem: string) => void = () => undefined): FromServer | undefined {
  const e = m.FromServerEnum;
  switch (e.case) {
    case 'serverHello':
      return workloadUpdateFrom({ case: 'serverHello', addedWorkloads: e.value.addedWorkloads }, warn);
    case 'updateWorkload':
      return workloadUpdateFrom({ case: 'updateWorkload', addedWorkloads: e.value.addedWorkloads, deletedWorkloads: e.value.deletedWorkloads }, warn);
    case 'updateWorkloadState':
      return updateWorkloadStateFrom(e.value.workloadStates, warn);
    case 'response':
      return { kind: 'response', response: e.value as WireResponse };
    case 'logsRequest': {
      const r = e.value.logsRequest;
      const tail = r?.tail;
      return {
        kind: 'logsRequest',
        requestId: e.value.requestId,
        workloads: eachOf(r?.workloadNames ?? [], (n) => instanceNameFrom(n), 'a workload name of a logs request', warn),
        options: {
          follow: r?.follow ?? false,
          tail: tail === undefined || tail < 0 ? undefined : tail,
          since: r?.since || undefined,
          until: r?.until || undefined,
        },
      };
    }
    case 'logsCancelRequest':
      return { kind: 'logsCancelRequest', requestId: e.value.requestId };
    default:
      return undefined;
  }
}

/** What the agent says to the server, as the bytes of a grpc_api.ToServer (its frequent messages without reflection). */
export function toServerBytes(m: ToServer): Uint8Array {
  switch (m.kind) {
    case 'logEntries':
      return encodeLogEntries(m.requestId, m.entries);
    case 'updateWorkloadState':
      return encodeWorkloadStates(m.states);
    case 'agentLoadStatus':
      return encodeAgentLoadStatus(m.agentName, m.cpuUsage, m.freeMemory);
    default:
      return toBinary(grpcApi().ToServerSchema, toServerMessage(m));
  }
}

export function toServerMessage(m: ToServer): grpc.ToServer {
  switch (m.kind) {
    case 'updateWorkloadState':
      return create(grpcApi().ToServerSchema, {
        ToServerEnum: { case: 'updateWorkloadState', value: { workloadStates: m.states.map(workloadStateTo) } },
      });
    case 'request':
      return create(grpcApi().ToServerSchema, { ToServerEnum: { case: 'request', value: m.request as pb.Request } });
    case 'logEntries':
      return create(grpcApi().ToServerSchema, {
        ToServerEnum: {
          case: 'logEntriesResponse',
          value: {
            requestId: m.requestId,
            logEntriesResponse: { logEntries: m.entries.map((e) => ({ workloadName: instanceNameTo(e.instanceName), message: e.message })) },
          },
        },
      });
    case 'logsStop':
      return create(grpcApi().ToServerSchema, {
        ToServerEnum: {
          case: 'logsStopResponse',
          value: {
            requestId: m.requestId,
            logsStopResponse: { workloadName: instanceNameTo(m.instanceName) },
          },
        },
      });
    case 'agentLoadStatus':
      return create(grpcApi().ToServerSchema, {
        ToServerEnum: {
          case: 'AgentLoadStatus',
          value: { agentName: m.agentName, cpuUsage: { cpuUsage: m.cpuUsage }, freeMemory: { freeMemory: BigInt(m.freeMemory) } },
        },
      });
  }
}
