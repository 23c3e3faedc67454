// The complete state for the Control Interface in standalone mode, and updates of the desired state.
// Masks address the logical structure users see (`desiredState.workloads.nginx.agent`); the wire
// form wraps maps in messages, so the state is picked logically and converted afterwards.
import { create } from '@bufbuild/protobuf';
import * as pb from '../proto/gen/ank_base_pb.js';
import { executionStateTo } from './convert.js';
import { type ConfigValue, type DesiredState, manifestDocument, manifestFromDocument } from './manifest.js';
import type { WorkloadState } from './messages.js';

type Tree = Record<string, unknown>;
const isTree = (v: unknown): v is Tree => v !== null && typeof v === 'object' && !Array.isArray(v);

/** swdd~api-object-serialization~1: maps keyed in sorted order, so the output is the same every time. */
function sorted(t: Tree): Tree {
  return Object.fromEntries(Object.keys(t).sort().map((k) => [k, isTree(t[k]) ? sorted(t[k] as Tree) : t[k]]));
}

/** The parts of `tree` the masks name (`*` matches any key); no masks: all of it. */
export function pick(tree: Tree, masks: readonly string[]): Tree {
  if (masks.length === 0) return tree;
  const out: Tree = {};
  const copy = (from: Tree, into: Tree, parts: string[]) => {
    const [head, ...rest] = parts;
    for (const key of head === '*' ? Object.keys(from) : [head]) {
      if (!(key in from)) continue;
      if (rest.length === 0 || !isTree(from[key])) into[key] = from[key];
      else copy(from[key] as Tree, (into[key] = isTree(into[key]) ? into[key] : {}) as Tree, rest);
    }
  };
  for (const mask of masks) copy(tree, out, mask.split('.'));
  return out;
}

const RESTART: Record<string, pb.RestartPolicy> = { NEVER: pb.RestartPolicy.NEVER, ON_FAILURE: pb.RestartPolicy.ON_FAILURE, ALWAYS: pb.RestartPolicy.ALWAYS };
const ADD: Record<string, pb.AddCondition> = { ADD_COND_RUNNING: 0, ADD_COND_SUCCEEDED: 1, ADD_COND_FAILED: 2 };
const RW: Record<string, pb.ReadWriteEnum> = { Nothing: 0, Read: 1, Write: 2, ReadWrite: 5 };
const invert = <V extends number>(r: Record<string, V>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [v, k])) as Record<number, string>;

function configItem(v: ConfigValue): pb.ConfigItem {
  if (typeof v === 'string') return create(pb.ConfigItemSchema, { ConfigItemEnum: { case: 'String', value: v } });
  if (Array.isArray(v)) return create(pb.ConfigItemSchema, { ConfigItemEnum: { case: 'array', value: { values: v.map(configItem) } } });
  return create(pb.ConfigItemSchema, { ConfigItemEnum: { case: 'object', value: { fields: Object.fromEntries(Object.entries(v).map(([k, x]) => [k, configItem(x)])) } } });
}

function configValue(item: pb.ConfigItem): ConfigValue {
  const c = item.ConfigItemEnum;
  if (c.case === 'array') return c.value.values.map(configValue);
  if (c.case === 'object') return Object.fromEntries(Object.entries(c.value.fields).map(([k, x]) => [k, configValue(x)]));
  return c.value ?? '';
}

const rulesTo = (rules: unknown) => (Array.isArray(rules) ? rules : []).map((r: Tree) => (r.type === 'LogRule'
  ? { AccessRightsRuleEnum: { case: 'logRule' as const, value: { workloadNames: r.workloadNames as string[] } } }
  : { AccessRightsRuleEnum: { case: 'stateRule' as const, value: { operation: RW[String(r.operation)] ?? 0, filterMasks: r.filterMask as string[] } } }));

/** A (possibly partial) workload of a manifest document on the wire. */
function workloadTo(w: Tree): pb.Workload {
  const access = isTree(w.controlInterfaceAccess) ? w.controlInterfaceAccess : undefined;
  return create(pb.WorkloadSchema, {
    agent: w.agent as string | undefined,
    runtime: w.runtime as string | undefined,
    runtimeConfig: w.runtimeConfig as string | undefined,
    restartPolicy: w.restartPolicy === undefined ? undefined : RESTART[String(w.restartPolicy)],
    dependencies: isTree(w.dependencies) ? { dependencies: Object.fromEntries(Object.entries(w.dependencies).map(([k, v]) => [k, ADD[String(v)]])) } : undefined,
    tags: isTree(w.tags) ? { tags: w.tags as Record<string, string> } : undefined,
    controlInterfaceAccess: access ? { allowRules: rulesTo(access.allowRules), denyRules: rulesTo(access.denyRules) } : undefined,
    configs: isTree(w.configs) ? { configs: w.configs as Record<string, string> } : undefined,
    files: Array.isArray(w.files) ? { files: (w.files as Tree[]).map((f) => ({ mountPoint: String(f.mountPoint), FileContent: f.data !== undefined ? { case: 'data' as const, value: String(f.data) } : { case: 'binaryData' as const, value: String(f.binaryData) } })) } : undefined,
  });
}

/** A wire workload as a manifest document workload. */
function workloadFrom(w: pb.Workload): Tree {
  const rule = (r: pb.AccessRightsRule) => (r.AccessRightsRuleEnum.case === 'logRule'
    ? { type: 'LogRule', workloadNames: r.AccessRightsRuleEnum.value.workloadNames }
    : { type: 'StateRule', operation: invert(RW)[r.AccessRightsRuleEnum.value?.operation ?? 0], filterMask: r.AccessRightsRuleEnum.value?.filterMasks ?? [] });
  return {
    runtime: w.runtime,
    agent: w.agent ?? '',
    restartPolicy: invert(RESTART)[w.restartPolicy ?? 0],
    dependencies: Object.fromEntries(Object.entries(w.dependencies?.dependencies ?? {}).map(([k, v]) => [k, invert(ADD)[v]])),
    tags: { ...(w.tags?.tags ?? {}) },
    runtimeConfig: w.runtimeConfig ?? '',
    controlInterfaceAccess: { allowRules: (w.controlInterfaceAccess?.allowRules ?? []).map(rule), denyRules: (w.controlInterfaceAccess?.denyRules ?? []).map(rule) },
    configs: { ...(w.configs?.configs ?? {}) },
    files: (w.files?.files ?? []).map((f) => (f.FileContent.case === 'binaryData' ? { mountPoint: f.mountPoint, binaryData: f.FileContent.value } : { mountPoint: f.mountPoint, data: f.FileContent.value ?? '' })),
  };
}

/** The complete state as users see it: desired state, the agent's workload states, the agent itself. */
function logicalState(agentName: string, desired: DesiredState, states: Iterable<WorkloadState>): Tree {
  const workloadStates: Tree = {};
  for (const s of states) {
    const { agentName: agent, workloadName, id } = s.instanceName;
    const byName = (workloadStates[agent] ??= {}) as Tree;
    ((byName[workloadName] ??= {}) as Tree)[id] = s.executionState;
  }
  return sorted({ desiredState: manifestDocument(desired), workloadStates, agents: { [agentName]: {} } });
}

/** swdd~api-object-serialization~1: the CompleteState a CompleteStateRequest with these field masks gets. */
export function completeState(agentName: string, desired: DesiredState, states: Iterable<WorkloadState>, fieldMask: readonly string[]): pb.CompleteState {
  const t = pick(logicalState(agentName, desired, states), fieldMask);
  const d = isTree(t.desiredState) ? t.desiredState : undefined;
  return create(pb.CompleteStateSchema, {
    desiredState: d && {
      apiVersion: d.apiVersion as string | undefined,
      workloads: isTree(d.workloads) ? { workloads: Object.fromEntries(Object.entries(d.workloads).map(([k, w]) => [k, workloadTo(w as Tree)])) } : undefined,
      configs: isTree(d.configs) ? { configs: Object.fromEntries(Object.entries(d.configs).map(([k, v]) => [k, configItem(v as ConfigValue)])) } : undefined,
    },
    workloadStates: isTree(t.workloadStates) ? {
      agentStateMap: Object.fromEntries(Object.entries(t.workloadStates).map(([agent, byName]) => [agent, {
        wlNameStateMap: Object.fromEntries(Object.entries(byName as Tree).map(([name, byId]) => [name, {
          idStateMap: Object.fromEntries(Object.entries(byId as Tree).map(([id, s]) => [id, executionStateTo(s as WorkloadState['executionState'])])),
        }])),
      }])),
    } : undefined,
    agents: isTree(t.agents) ? { agents: Object.fromEntries(Object.keys(t.agents).map((a) => [a, {}])) } : undefined,
  });
}

/**
 * The desired state after an UpdateStateRequest: each update mask path under `desiredState` takes what
 * the new state has there, or goes when it has nothing; no mask replaces the whole desired state.
 * Throws ManifestError when the result is not a valid manifest.
 */
export function applyUpdate(desired: DesiredState, newState: pb.CompleteState | undefined, updateMask: readonly string[]): DesiredState {
  const next = newState?.desiredState;
  const incoming: Tree = {
    apiVersion: next?.apiVersion || desired.apiVersion,
    workloads: Object.fromEntries(Object.entries(next?.workloads?.workloads ?? {}).map(([k, w]) => [k, workloadFrom(w)])),
    configs: Object.fromEntries(Object.entries(next?.configs?.configs ?? {}).map(([k, v]) => [k, configValue(v)])),
  };
  const doc = manifestDocument(desired);
  const masks = updateMask.length > 0 ? updateMask : ['desiredState'];
  for (const mask of masks) {
    const [root, ...path] = mask.split('.');
    if (root !== 'desiredState') continue;
    if (path.length === 0) {
      Object.assign(doc, incoming);
      continue;
    }
    let from: unknown = incoming;
    let into: Tree = doc;
    for (const [i, key] of path.entries()) {
      from = isTree(from) ? from[key] : undefined;
      if (i === path.length - 1) {
        if (from === undefined) delete into[key];
        else into[key] = structuredClone(from);
      } else {
        into = (into[key] = isTree(into[key]) ? into[key] : {}) as Tree;
      }
    }
  }
  return manifestFromDocument(doc);
}
