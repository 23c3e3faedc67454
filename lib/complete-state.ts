// The complete state for the Control Interface in standalone mode, and updates of the desired state.
// Masks address the logical structure users see (`desiredState.workloads.nginx.agent`): the state is
// built and picked as domain objects and crosses to the wire only at the end.
import type { ExecutionState } from './execution-state.js';
import { type DesiredState, checkDesiredState, declaredState } from './desired-state.js';
import type { WorkloadState } from './messages.js';
import { type ConfigValue, type DeclaredState, EMPTY_WORKLOAD, type Workload } from './workload.js';
import { isRecord } from './record.js';

/** The complete state as masks address it; a mask leaves out what it does not name. */
export interface CompleteState {
  readonly desiredState?: {
    readonly apiVersion?: string;
    readonly workloads?: Readonly<Record<string, Partial<Workload>>>;
    readonly configs?: Readonly<Record<string, ConfigValue>>;
  };
  /** agent → workload → instance id → state */
  readonly workloadStates?: Readonly<Record<string, Readonly<Record<string, Readonly<Record<string, ExecutionState>>>>>>;
  readonly agents?: Readonly<Record<string, object>>;
}

type Tree = Record<string, unknown>;

/** The tree under `key`, made (replacing a leaf) when there is none. */
function subtree(tree: Tree, key: string): Tree {
  const child = tree[key];
  if (isRecord(child)) return child;
  const made: Tree = {};
  tree[key] = made;
  return made;
}

/** swdd~api-object-serialization~1: maps keyed in sorted order, so the output is the same every time. */
function sorted<T extends object>(t: T): T {
  return Object.fromEntries(
    Object.keys(t)
      .sort()
      .map((k) => {
        const v = (t as Tree)[k];
        return [k, isRecord(v) ? sorted(v) : v];
      }),
  ) as T;
}

/** The parts of `tree` the masks name (`*` matches any key); no masks: all of it. */
export function pick<T extends object>(tree: T, masks: readonly string[]): T {
  if (masks.length === 0) return tree;
  const out: Tree = {};
  const copy = (from: Tree, into: Tree, parts: string[]) => {
    const [head, ...rest] = parts;
    for (const key of head === '*' ? Object.keys(from) : [head]) {
      if (!(key in from)) continue;
      if (rest.length === 0 || !isRecord(from[key])) into[key] = from[key];
      else copy(from[key] as Tree, subtree(into, key), rest);
    }
  };
  for (const mask of masks) copy(tree as Tree, out, mask.split('.'));
  return out as T;
}

/** The complete state as users see it: desired state, the agent's workload states, the agent itself. */
function logicalState(agentName: string, desired: DesiredState, states: Iterable<WorkloadState>): CompleteState {
  const workloadStates: Record<string, Record<string, Record<string, ExecutionState>>> = {};
  for (const s of states) {
    const { agentName: agent, workloadName, id } = s.instanceName;
    workloadStates[agent] ??= {};
    workloadStates[agent][workloadName] ??= {};
    workloadStates[agent][workloadName][id] = s.executionState;
  }
  return sorted({ desiredState: declaredState(desired), workloadStates, agents: { [agentName]: {} } });
}

/** The part of the complete state that a CompleteStateRequest with these field masks gets. */
export const maskedState = (agentName: string, desired: DesiredState, states: Iterable<WorkloadState>, fieldMask: readonly string[]): CompleteState =>
  pick(logicalState(agentName, desired, states), fieldMask);

/** Which paths of a state an event reports as added, updated and removed. */
export interface AlteredFields {
  readonly addedFields: string[];
  readonly updatedFields: string[];
  readonly removedFields: string[];
}

/** An execution state is one value: below it there is nothing to address. */
const isLeaf = (v: unknown) => !isRecord(v) || ('state' in v && 'substate' in v);
/** What comes or goes as a whole: a value, an execution state, a workload, an agent. */
const isUnit = (v: unknown) => isLeaf(v) || 'runtime' in (v as Tree) || Object.keys(v as Tree).length === 0;

/**
 * The paths that differ between two states: a workload or an instance's state that comes or goes is
 * one path (`desiredState.workloads.nginx`, `workloadStates.agent_A.nginx.<id>`), a change inside a
 * workload is the field that changed (`desiredState.workloads.nginx.runtimeConfig`).
 */
export function alteredFields(before: object, after: object): AlteredFields {
  const out: AlteredFields = { addedFields: [], updatedFields: [], removedFields: [] };
  const units = (v: unknown, path: string): string[] => (isUnit(v) ? [path] : Object.entries(v as Tree).flatMap(([k, x]) => units(x, `${path}.${k}`)));
  const walk = (a: Tree, b: Tree, prefix: string) => {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const path = prefix ? `${prefix}.${key}` : key;
      if (!(key in a)) out.addedFields.push(...units(b[key], path));
      else if (!(key in b)) out.removedFields.push(...units(a[key], path));
      else if (!isLeaf(a[key]) && !isLeaf(b[key])) walk(a[key] as Tree, b[key] as Tree, path);
      else if (JSON.stringify(a[key]) !== JSON.stringify(b[key])) out.updatedFields.push(path);
    }
  };
  walk(before as Tree, after as Tree, '');
  return out;
}

/** The desired state of an UpdateStateRequest's new state, as the codec reads it. */
export type IncomingDesiredState = NonNullable<CompleteState['desiredState']>;

/**
 * The desired state after an UpdateStateRequest: each update mask path under `desiredState` takes what
 * the new state has there, or goes when it has nothing; no mask replaces the whole desired state.
 * Throws ManifestError when the result is not a valid desired state.
 */
export function applyUpdate(desired: DesiredState, incoming: IncomingDesiredState, updateMask: readonly string[]): DesiredState {
  const state: Tree = structuredClone(declaredState(desired)) as unknown as Tree;
  const masks = updateMask.length > 0 ? updateMask : ['desiredState'];
  for (const mask of masks) {
    const [root, ...path] = mask.split('.');
    if (root !== 'desiredState') continue;
    if (path.length === 0) {
      Object.assign(state, incoming, { apiVersion: incoming.apiVersion ?? desired.apiVersion });
      continue;
    }
    let from: unknown = incoming;
    let into = state;
    for (const [i, key] of path.entries()) {
      from = isRecord(from) ? from[key] : undefined;
      if (i === path.length - 1) {
        if (from === undefined) delete into[key];
        else into[key] = structuredClone(from);
      } else {
        into = subtree(into, key);
      }
    }
  }
  // What a mask left partial is completed with the wire's defaults (a workload without runtime is refused).
  const workloads = isRecord(state.workloads) ? state.workloads : {};
  return checkDesiredState({
    apiVersion: String(state.apiVersion ?? desired.apiVersion),
    workloads: Object.fromEntries(Object.entries(workloads).map(([name, w]) => [name, { ...EMPTY_WORKLOAD, ...(w as Partial<Workload>) }])),
    configs: (isRecord(state.configs) ? state.configs : {}) as DeclaredState['configs'],
  });
}
