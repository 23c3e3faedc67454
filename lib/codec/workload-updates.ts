// The server's messages of workloads read without reflection: a create and a delete each pass one, and a
// reflective read of it runs cold (generic code, a few times per workload). FromServer { updateWorkload = 1
// { addedWorkloads = 1 : rep AddedWorkload, deletedWorkloads = 2 : rep DeletedWorkload } | serverHello = 4
// { addedWorkloads = 1 } }, with AddedWorkload { instanceName = 1, workload = 2 : Workload { agent = 1,
// restartPolicy = 2, dependencies = 3 { map = 1 }, tags = 4 { map = 1 }, runtime = 5, runtimeConfig = 6,
// controlInterfaceAccess = 7 { allowRules = 1, denyRules = 2 : rep { stateRule = 1 { operation = 1,
// filterMasks = 2 } | logRule = 2 { workloadNames = 1 } } }, configs = 8 { map = 1 }, files = 9 { files = 1 :
// rep { mountPoint = 1, data = 2 | binaryData = 3 } } } } and DeletedWorkload { instanceName = 1, dependencies
// = 2 : map }. The fields come out as protobuf-es gives them (spec/lib/workload-updates.spec.ts), for the one
// conversion to the domain every message takes (lib/codec/wire.ts). A message field given twice (protobuf
// merges the two) is left to protobuf-es. Pure.
import { NotForHand, type Walk, byHand, enumOf, fields, soleField, stringOf, within } from './proto-reader.js';
import { type WireWorkloadState, nameOf } from './workload-states.js';

type Name = NonNullable<WireWorkloadState['instanceName']>;

export type WireAccessRule = {
  readonly AccessRightsRuleEnum:
    | { readonly case: 'stateRule'; readonly value: { readonly operation: number; readonly filterMasks: readonly string[] } }
    | { readonly case: 'logRule'; readonly value: { readonly workloadNames: readonly string[] } }
    | { readonly case: undefined; readonly value?: undefined };
};

export type WireFile = {
  readonly mountPoint: string;
  readonly FileContent: { readonly case: 'data' | 'binaryData'; readonly value: string } | { readonly case: undefined; readonly value?: undefined };
};

/** What the domain reads of a Workload (protobuf-es's messages carry these fields). */
export type WireWorkload = {
  readonly agent?: string;
  readonly restartPolicy?: number;
  readonly dependencies?: { readonly dependencies: Readonly<Record<string, number>> };
  readonly tags?: { readonly tags: Readonly<Record<string, string>> };
  readonly runtime?: string;
  readonly runtimeConfig?: string;
  readonly controlInterfaceAccess?: { readonly allowRules: readonly WireAccessRule[]; readonly denyRules: readonly WireAccessRule[] };
  readonly configs?: { readonly configs: Readonly<Record<string, string>> };
  readonly files?: { readonly files: readonly WireFile[] };
};

export type WireAdded = { readonly instanceName?: Name; readonly workload?: WireWorkload };
export type WireDeleted = { readonly instanceName?: Name; readonly dependencies: Readonly<Record<string, number>> };

export type WireWorkloadUpdate =
  | { readonly case: 'updateWorkload'; readonly addedWorkloads: WireAdded[]; readonly deletedWorkloads: WireDeleted[] }
  | { readonly case: 'serverHello'; readonly addedWorkloads: WireAdded[] };

/**
 * The workloads of a FromServer that is an updateWorkload or a serverHello and nothing else; undefined for any
 * other message, or one the hand reader does not take (it is then read the usual way, which says what is wrong).
 */
export function workloadUpdateOf(bytes: Uint8Array): WireWorkloadUpdate | undefined {
  return byHand(() => {
    const top = soleField(bytes);
    const kind = top?.field === 1 ? 'updateWorkload' : top?.field === 4 ? 'serverHello' : undefined;
    if (!top || !kind) return undefined;
    const { walk, end } = top;
    const addedWorkloads: WireAdded[] = [];
    const deletedWorkloads: WireDeleted[] = [];
    fields(walk, end, (field, type) => {
      if (field === 1) addedWorkloads.push(addedOf(walk, within(walk, type)));
      else if (field === 2 && kind === 'updateWorkload') deletedWorkloads.push(deletedOf(walk, within(walk, type)));
      else return false;
    });
    return kind === 'updateWorkload' ? { case: kind, addedWorkloads, deletedWorkloads } : { case: kind, addedWorkloads };
  });
}

/** A message field's first value; a second one (which protobuf merges into the first) is for the usual reader. */
function once<T>(before: T | undefined, read: () => T): T {
  if (before !== undefined) throw new NotForHand();
  return read();
}

function addedOf(walk: Walk, end: number): WireAdded {
  let instanceName: Name | undefined;
  let workload: WireWorkload | undefined;
  fields(walk, end, (field, type) => {
    if (field === 1) instanceName = once(instanceName, () => nameOf(walk, within(walk, type)));
    else if (field === 2) workload = once(workload, () => workloadOf(walk, within(walk, type)));
    else return false;
  });
  return { instanceName, workload };
}

function deletedOf(walk: Walk, end: number): WireDeleted {
  let instanceName: Name | undefined;
  const dependencies: Record<string, number> = {};
  fields(walk, end, (field, type) => {
    if (field === 1) instanceName = once(instanceName, () => nameOf(walk, within(walk, type)));
    else if (field === 2) entryOf(walk, within(walk, type), dependencies, enumOf, 0);
    else return false;
  });
  return { instanceName, dependencies };
}

/**
 * A map's entry { key = 1, value = 2 } set into `map` (a key given twice: the last wins). Another field in an entry
 * is for the usual reader: protobuf-es does not pass over it, and reads its value as the next tag.
 */
function entryOf<V>(walk: Walk, end: number, map: Record<string, V>, value: (walk: Walk, type: number) => V, empty: V): void {
  let key = '';
  let v = empty;
  fields(walk, end, (field, type) => {
    if (field === 1) key = stringOf(walk, type);
    else if (field === 2) v = value(walk, type);
    else throw new NotForHand();
  });
  map[key] = v;
}

/** A message of one map field (Tags, Dependencies, ConfigMappings). */
function mapOf<V>(walk: Walk, end: number, value: (walk: Walk, type: number) => V, empty: V): Record<string, V> {
  const map: Record<string, V> = {};
  fields(walk, end, (field, type) => {
    if (field === 1) entryOf(walk, within(walk, type), map, value, empty);
    else return false;
  });
  return map;
}

function workloadOf(walk: Walk, end: number): WireWorkload {
  const w: { -readonly [K in keyof WireWorkload]: WireWorkload[K] } = {};
  const map = <V>(value: (walk: Walk, type: number) => V, empty: V, type: number) => mapOf(walk, within(walk, type), value, empty);
  fields(walk, end, (field, type) => {
    if (field === 1) w.agent = stringOf(walk, type);
    else if (field === 2) w.restartPolicy = enumOf(walk, type);
    else if (field === 3) w.dependencies = once(w.dependencies, () => ({ dependencies: map(enumOf, 0, type) }));
    else if (field === 4) w.tags = once(w.tags, () => ({ tags: map(stringOf, '', type) }));
    else if (field === 5) w.runtime = stringOf(walk, type);
    else if (field === 6) w.runtimeConfig = stringOf(walk, type);
    else if (field === 7) w.controlInterfaceAccess = once(w.controlInterfaceAccess, () => accessOf(walk, within(walk, type)));
    else if (field === 8) w.configs = once(w.configs, () => ({ configs: map(stringOf, '', type) }));
    else if (field === 9) w.files = once(w.files, () => filesOf(walk, within(walk, type)));
    else return false;
  });
  return w;
}

function accessOf(walk: Walk, end: number): NonNullable<WireWorkload['controlInterfaceAccess']> {
  const allowRules: WireAccessRule[] = [];
  const denyRules: WireAccessRule[] = [];
  fields(walk, end, (field, type) => {
    if (field === 1) allowRules.push(ruleOf(walk, within(walk, type)));
    else if (field === 2) denyRules.push(ruleOf(walk, within(walk, type)));
    else return false;
  });
  return { allowRules, denyRules };
}

function ruleOf(walk: Walk, end: number): WireAccessRule {
  let rule: WireAccessRule['AccessRightsRuleEnum'] = { case: undefined };
  fields(walk, end, (field, type) => {
    if (field !== 1 && field !== 2) return false;
    // The same case twice merges in protobuf; another case replaces it.
    if (rule.case === (field === 1 ? 'stateRule' : 'logRule')) throw new NotForHand();
    rule =
      field === 1
        ? { case: 'stateRule', value: stateRuleOf(walk, within(walk, type)) }
        : { case: 'logRule', value: { workloadNames: stringsOf(walk, within(walk, type), 1) } };
  });
  return { AccessRightsRuleEnum: rule };
}

function stateRuleOf(walk: Walk, end: number): { operation: number; filterMasks: string[] } {
  let operation = 0;
  const filterMasks: string[] = [];
  fields(walk, end, (field, type) => {
    if (field === 1) operation = enumOf(walk, type);
    else if (field === 2) filterMasks.push(stringOf(walk, type));
    else return false;
  });
  return { operation, filterMasks };
}

/** The values of a message's one repeated string field, number `number`. */
function stringsOf(walk: Walk, end: number, number: number): string[] {
  const values: string[] = [];
  fields(walk, end, (field, type) => {
    if (field === number) values.push(stringOf(walk, type));
    else return false;
  });
  return values;
}

function filesOf(walk: Walk, end: number): NonNullable<WireWorkload['files']> {
  const files: WireFile[] = [];
  fields(walk, end, (field, type) => {
    if (field === 1) files.push(fileOf(walk, within(walk, type)));
    else return false;
  });
  return { files };
}

function fileOf(walk: Walk, end: number): WireFile {
  let mountPoint = '';
  let content: WireFile['FileContent'] = { case: undefined };
  fields(walk, end, (field, type) => {
    if (field === 1) mountPoint = stringOf(walk, type);
    else if (field === 2) content = { case: 'data', value: stringOf(walk, type) };
    else if (field === 3) content = { case: 'binaryData', value: stringOf(walk, type) };
    else return false;
  });
  return { mountPoint, FileContent: content };
}
