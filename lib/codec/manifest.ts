// Ankaios manifests (standalone mode): the document's syntax read into a declared state, which
// lib/desired-state.ts checks and renders as the server would.
import { parse as parseYaml } from 'yaml';
import { ADD_CONDITION, READ_WRITE, RESTART_POLICY } from './tables.js';
import { CONFIG_KEY, type DesiredState, ManifestError, checkDesiredState, checkWorkloadName, fail } from '../desired-state.js';
import type { AccessRule, ConfigValue, Workload, WorkloadFile } from '../workload.js';
import { isRecord } from '../record.js';

export const API_VERSION = 'v1';
/** Older manifests still accepted, with a warning (swdd~api-version-checks~1). */
export const DEPRECATED_API_VERSIONS = ['v0.1'];

type Doc = Record<string, unknown>;

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
