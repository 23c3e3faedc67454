// The desired state of standalone mode: Ankaios manifests read into domain workloads, and the checks
// and rendering the server would do (names, config references, cycles, templates, instance ids).
import { parse as parseYaml } from 'yaml';
import { ADD_CONDITION, READ_WRITE, RESTART_POLICY } from './codec/tables.js';
import {
  type AccessRule,
  type ConfigValue,
  type DeclaredState,
  type DeleteCondition,
  type DeletedWorkload,
  type Workload,
  type WorkloadFile,
  type WorkloadSpec,
  NAME,
  NAME_RULE,
  instanceId,
} from './workload.js';
import { isRecord } from './record.js';

/** A manifest the agent cannot use; the message says where and why. */
export class ManifestError extends Error {}

/** A workload of the desired state: as declared, and rendered once for its agent. */
export interface DesiredWorkload extends Workload {
  readonly name: string;
  readonly spec: WorkloadSpec;
}

export interface DesiredState {
  readonly apiVersion: string;
  readonly workloads: ReadonlyMap<string, DesiredWorkload>;
  readonly configs: Readonly<Record<string, ConfigValue>>;
}

export const API_VERSION = 'v1';
/** Older manifests still accepted, with a warning (swdd~api-version-checks~1). */
export const DEPRECATED_API_VERSIONS = ['v0.1'];

const CONFIG_KEY = NAME;
/** An agent name, or none (a workload not scheduled yet). */
const AGENT_NAME = { test: (agent: string) => agent === '' || NAME.test(agent) };
const MASK_SEGMENT = /^(\*|[a-zA-Z0-9_-]+)$/;
const LOG_NAME = /^[a-zA-Z0-9_*-]{1,64}$/;

type Doc = Record<string, unknown>;

function fail(where: string, message: string): never {
  throw new ManifestError(`${where}: ${message}`);
}

// ---- the manifest document → declared workloads (its syntax) ------------------------------------

function stringOf(v: unknown, where: string, field: string): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return fail(where, `'${field}' must be a string`);
}

function stringList(v: unknown, where: string, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail(where, `'${field}' must be a list`);
  return v.map((x) => stringOf(x, where, field));
}

function accessRule(v: unknown, where: string): AccessRule {
  if (!isRecord(v)) fail(where, 'an access rule must be a mapping');
  if (v.type === 'StateRule') {
    const operation = READ_WRITE.fromText(String(v.operation)) ?? fail(where, `unknown operation '${String(v.operation)}' (${READ_WRITE.texts})`);
    return { kind: 'state', operation, filterMasks: stringList(v.filterMask ?? v.filterMasks, where, 'filterMask') };
  }
  if (v.type === 'LogRule') return { kind: 'log', workloadNames: stringList(v.workloadNames, where, 'workloadNames') };
  return fail(where, `unknown access rule type '${String(v.type)}' (StateRule or LogRule)`);
}

function tagsOf(v: unknown, where: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (Array.isArray(v)) {
    return Object.fromEntries(
      v.map((t) => (isRecord(t) ? [stringOf(t.key, where, 'tags.key'), stringOf(t.value, where, 'tags.value')] : fail(where, 'a tag must have key and value'))),
    );
  }
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, stringOf(x, where, `tags.${k}`)]));
  return fail(where, "'tags' must be a mapping");
}

function filesOf(v: unknown, where: string): WorkloadFile[] {
  return (v === undefined || v === null ? [] : Array.isArray(v) ? v : fail(where, "'files' must be a list")).map((f: unknown) => {
    if (!isRecord(f)) fail(where, 'a file must be a mapping with mountPoint and data or binaryData');
    const mountPoint = stringOf(f.mountPoint, where, 'files.mountPoint');
    if ((f.data === undefined) === (f.binaryData === undefined)) fail(where, `the file '${mountPoint}' needs either 'data' or 'binaryData'`);
    return f.data !== undefined
      ? { mountPoint, data: stringOf(f.data, where, 'files.data') }
      : { mountPoint, binaryData: stringOf(f.binaryData, where, 'files.binaryData') };
  });
}

function configValue(v: unknown, where: string): ConfigValue {
  if (Array.isArray(v)) return v.map((x) => configValue(x, where));
  if (isRecord(v)) {
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => {
        // swdd~api-config-item-key-naming-convention~1
        if (!CONFIG_KEY.test(k)) fail(where, `invalid config key '${k}' (letters, digits, '-' and '_')`);
        return [k, configValue(x, `${where}.${k}`)];
      }),
    );
  }
  return stringOf(v, where, 'value');
}

function mapping(v: unknown, where: string, field: string): Doc {
  if (v === undefined || v === null) return {};
  return isRecord(v) ? v : fail(where, field);
}

function workloadOf(name: string, v: unknown): Workload {
  const where = `workload '${name}'`;
  if (!isRecord(v)) fail(where, 'must be a mapping');
  const runtime = v.runtime === undefined ? fail(where, "'runtime' is missing") : stringOf(v.runtime, where, 'runtime');
  const restart = v.restartPolicy === undefined ? RESTART_POLICY.toText('Never') : String(v.restartPolicy);
  const restartPolicy = RESTART_POLICY.fromText(restart) ?? fail(where, `unknown restartPolicy '${restart}' (${RESTART_POLICY.texts})`);
  const dependencies = Object.fromEntries(
    Object.entries(mapping(v.dependencies, where, "'dependencies' must be a mapping")).map(([dep, c]) => [
      dep,
      ADD_CONDITION.fromText(String(c)) ?? fail(where, `unknown condition '${String(c)}' for dependency '${dep}'`),
    ]),
  );
  const configs = Object.fromEntries(
    Object.entries(mapping(v.configs, where, "'configs' must be a mapping of alias to config key")).map(([alias, key]) => [
      alias,
      stringOf(key, where, `configs.${alias}`),
    ]),
  );
  const access = isRecord(v.controlInterfaceAccess) ? v.controlInterfaceAccess : {};
  const rules = (field: 'allowRules' | 'denyRules') =>
    (access[field] === undefined
      ? []
      : Array.isArray(access[field])
        ? (access[field] as unknown[])
        : fail(where, `'controlInterfaceAccess.${field}' must be a list`)
    ).map((r) => accessRule(r, where));
  return {
    agent: v.agent === undefined || v.agent === null ? '' : stringOf(v.agent, where, 'agent'),
    runtime,
    runtimeConfig: v.runtimeConfig === undefined || v.runtimeConfig === null ? '' : stringOf(v.runtimeConfig, where, 'runtimeConfig'),
    restartPolicy,
    dependencies,
    tags: tagsOf(v.tags, where),
    controlInterfaceAccess: { allowRules: rules('allowRules'), denyRules: rules('denyRules') },
    configs,
    files: filesOf(v.files, where),
  };
}

/** swdd~api-version-checks~1: parses and checks a manifest; `warn` hears of deprecated versions. */
export function parseManifest(text: string, warn: (message: string) => void = () => undefined): DesiredState {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ManifestError(`not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (!isRecord(doc)) throw new ManifestError('a manifest must be a YAML mapping with apiVersion and workloads');
  const apiVersion = doc.apiVersion;
  if (apiVersion === undefined) throw new ManifestError(`'apiVersion' is missing (this agent reads '${API_VERSION}')`);
  if (apiVersion !== API_VERSION && !DEPRECATED_API_VERSIONS.includes(String(apiVersion))) {
    throw new ManifestError(`unsupported apiVersion '${String(apiVersion)}' (this agent reads '${API_VERSION}')`);
  }
  if (apiVersion !== API_VERSION) warn(`apiVersion '${String(apiVersion)}' is deprecated; use '${API_VERSION}'.`);
  for (const key of Object.keys(doc)) {
    if (!['apiVersion', 'workloads', 'configs'].includes(key)) throw new ManifestError(`unknown top-level key '${key}' (apiVersion, workloads, configs)`);
  }
  if (doc.configs !== undefined && doc.configs !== null && !isRecord(doc.configs)) throw new ManifestError("'configs' must be a mapping");
  const configs = Object.fromEntries(
    Object.entries(isRecord(doc.configs) ? doc.configs : {}).map(([key, value]) => {
      if (!CONFIG_KEY.test(key)) throw new ManifestError(`invalid config key '${key}' (letters, digits, '-' and '_')`);
      return [key, configValue(value, `config '${key}'`)];
    }),
  );
  if (doc.workloads !== undefined && doc.workloads !== null && !isRecord(doc.workloads)) throw new ManifestError("'workloads' must be a mapping");
  const workloads = Object.fromEntries(
    Object.entries(isRecord(doc.workloads) ? doc.workloads : {}).map(([name, w]) => {
      checkWorkloadName(name);
      return [name, workloadOf(name, w)];
    }),
  );
  return checkDesiredState({ apiVersion: API_VERSION, workloads, configs });
}

// ---- the checks of a declared state, from a manifest or an UpdateStateRequest --------------------

/** swdd~api-workload-naming-convention~1 */
function checkWorkloadName(name: string): void {
  if (!NAME.test(name)) fail(`workload '${name}'`, `a workload name has ${NAME_RULE}`);
}

/** swdd~api-access-rules-filter-mask-convention~1, swdd~api-access-rules-logs-workload-names-convention~1 */
function checkAccessRule(rule: AccessRule, where: string): void {
  if (rule.kind === 'state') {
    if (rule.filterMasks.length === 0) fail(where, 'a StateRule needs at least one filter mask');
    for (const mask of rule.filterMasks) {
      if (!mask.split('.').every((s) => MASK_SEGMENT.test(s))) fail(where, `invalid filter mask '${mask}' (dot-separated names or '*')`);
    }
  } else {
    for (const name of rule.workloadNames) {
      if (!LOG_NAME.test(name) || name.split('*').length > 2)
        fail(where, `invalid workload name '${name}' in a LogRule (a workload name with at most one '*')`);
    }
  }
}

function checkWorkload(name: string, w: Workload, configs: Readonly<Record<string, ConfigValue>>): void {
  const where = `workload '${name}'`;
  checkWorkloadName(name);
  if (w.runtime === '') fail(where, "'runtime' is missing");
  for (const dep of Object.keys(w.dependencies)) if (!NAME.test(dep)) fail(where, `invalid dependency name '${dep}'`);
  for (const [alias, key] of Object.entries(w.configs)) {
    // swdd~api-config-aliases-and-config-reference-keys-naming-convention~1
    if (!CONFIG_KEY.test(alias) || !CONFIG_KEY.test(key)) fail(where, `invalid config reference '${alias}: ${key}' (letters, digits, '-' and '_')`);
    if (!(key in configs)) fail(where, `refers to the config '${key}', which the manifest does not define`);
  }
  for (const rule of [...w.controlInterfaceAccess.allowRules, ...w.controlInterfaceAccess.denyRules]) checkAccessRule(rule, where);
}

/** Checks a declared state and renders each workload once; throws ManifestError. */
export function checkDesiredState(declared: DeclaredState): DesiredState {
  for (const [name, w] of Object.entries(declared.workloads)) checkWorkload(name, w, declared.configs);
  const workloads = new Map(Object.entries(declared.workloads).map(([name, w]) => [name, { ...w, name, spec: render(name, w, declared.configs) }]));
  const state: DesiredState = { apiVersion: declared.apiVersion, workloads, configs: declared.configs };
  checkCycles(state);
  return state;
}

/** The desired state as declared again (the inverse of checkDesiredState). */
export function declaredState(state: DesiredState): DeclaredState {
  return {
    apiVersion: state.apiVersion,
    workloads: Object.fromEntries([...state.workloads].map(([name, { name: _n, spec: _s, ...w }]) => [name, w])),
    configs: state.configs,
  };
}

/** Rejects dependency cycles, naming the cycle (`a -> b -> a`). */
export function checkCycles(state: DesiredState): void {
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (name: string): void => {
    const at = path.indexOf(name);
    if (at >= 0) throw new ManifestError(`the dependencies form a cycle: ${[...path.slice(at), name].join(' -> ')}`);
    const w = state.workloads.get(name);
    if (!w || done.has(name)) return;
    path.push(name);
    for (const dep of Object.keys(w.dependencies)) visit(dep);
    path.pop();
    done.add(name);
  };
  for (const name of [...state.workloads.keys()].sort()) visit(name);
}

/** The largest text a template may render to: a runtime config, an agent name. */
export const MAX_RENDERED_BYTES = 1024 * 1024;

/** Renders `{{alias}}`, `{{alias.key}}` and `{{alias.0}}` from the workload's configs; the result is bounded in size. */
export function renderTemplate(template: string, values: Readonly<Record<string, ConfigValue>>, where: string): string {
  let size = template.length;
  return template.replace(/\{\{\s*([^}]*?)\s*\}\}/g, (_m, expression: string) => {
    if (expression.startsWith('#') || expression.startsWith('/'))
      fail(where, `template blocks like '{{${expression}}}' are not supported; use {{alias.key}} values`);
    let value: ConfigValue | undefined = values as ConfigValue;
    for (const part of expression.split('.')) {
      const key = part.replace(/^\[(.*)\]$/, '$1');
      value = Array.isArray(value) ? value[Number(key)] : typeof value === 'object' && value !== null ? (value as Record<string, ConfigValue>)[key] : undefined;
    }
    if (typeof value !== 'string') fail(where, `the template '{{${expression}}}' does not name a config value`);
    size += value.length;
    if (size > MAX_RENDERED_BYTES) fail(where, `the templates render to more than ${MAX_RENDERED_BYTES / 1024 / 1024} MiB`);
    return value;
  });
}

/** The workload as its agent runs it: templates rendered, instance named (swdd~api-workload-execution-instance-naming~1). */
function render(name: string, w: Workload, configs: Readonly<Record<string, ConfigValue>>): WorkloadSpec {
  const where = `workload '${name}'`;
  const values = Object.fromEntries(Object.entries(w.configs).map(([alias, key]) => [alias, configs[key]]));
  const runtimeConfig = renderTemplate(w.runtimeConfig, values, where);
  const agent = renderTemplate(w.agent, values, where);
  // swdd~api-agent-naming-convention~1 (empty: not scheduled)
  if (!AGENT_NAME.test(agent)) fail(where, `invalid agent name '${agent}' (letters, digits, '-' and '_')`);
  const { agent: _agent, configs: _configs, ...spec } = w;
  return { ...spec, runtimeConfig, instanceName: { workloadName: name, agentName: agent, id: instanceId(runtimeConfig) } };
}

/**
 * Implicit inter-workload dependencies (the Ankaios dependencies guide): a workload others depend on with ADD_COND_RUNNING is deleted
 * only when each of them is neither pending nor running.
 */
export function deleteConditionsOf(name: string, state: DesiredState): Record<string, DeleteCondition> {
  const conditions: Record<string, DeleteCondition> = {};
  for (const other of state.workloads.values()) {
    if (other.dependencies[name] === 'Running') conditions[other.name] = 'NotPendingNorRunning';
  }
  return conditions;
}

/** The workloads of the desired state that this agent runs. */
export function specsFor(agentName: string, state: DesiredState): WorkloadSpec[] {
  return [...state.workloads.values()].map((w) => w.spec).filter((s) => s.instanceName.agentName === agentName);
}

/** What changes for this agent from one desired state to the next, as an UpdateWorkload carries it. */
export function diffFor(agentName: string, before: DesiredState, after: DesiredState): { added: WorkloadSpec[]; deleted: DeletedWorkload[] } {
  const old = new Map(specsFor(agentName, before).map((s) => [s.instanceName.workloadName, s]));
  const next = new Map(specsFor(agentName, after).map((s) => [s.instanceName.workloadName, s]));
  const same = (a: WorkloadSpec, b: WorkloadSpec) => JSON.stringify(a) === JSON.stringify(b);
  const added = [...next.values()].filter((s) => !old.has(s.instanceName.workloadName) || !same(old.get(s.instanceName.workloadName)!, s));
  const deleted = [...old.values()]
    .filter((s) => !next.has(s.instanceName.workloadName) || !same(next.get(s.instanceName.workloadName)!, s))
    .map((s) => ({ instanceName: s.instanceName, dependencies: deleteConditionsOf(s.instanceName.workloadName, before) }));
  return { added, deleted };
}
