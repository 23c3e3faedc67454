// The desired state: what the workloads of a cluster are as declared (by a manifest in standalone mode, or
// an UpdateStateRequest of a workload), with the checks and rendering the server would do (names, config
// references, cycles, templates, instance ids), and what it asks of one agent.
import { NAME, NAME_RULE, instanceId } from './workload.js';
import type { AccessRule, ConfigValue, DeclaredState, DeleteCondition, DeletedWorkload, Workload, WorkloadSpec } from './workload.js';

/** A desired state (a manifest's, or an update's) the agent cannot use; the message says where and why. */
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

/** A config key, and an alias of one. */
export const CONFIG_KEY = NAME;
/** An agent name, or none (a workload not scheduled yet). */
const AGENT_NAME = { test: (agent: string) => agent === '' || NAME.test(agent) };
const MASK_SEGMENT = /^(\*|[a-zA-Z0-9_-]+)$/;
const LOG_NAME = /^[a-zA-Z0-9_*-]{1,64}$/;

export function fail(where: string, message: string): never {
  throw new ManifestError(`${where}: ${message}`);
}

/** swdd~api-workload-naming-convention~1 */
export function checkWorkloadName(name: string): void {
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
