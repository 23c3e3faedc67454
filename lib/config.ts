// The agent's settings: command-line flags over environment variables over the config file over defaults.
import { parse as parseToml } from 'smol-toml';
import { DEFAULT_CONFIG_PATH, DEFAULT_SERVER_URL, KUBELET_IMAGE_GC } from './defaults.js';
import { type CrashLoopBackoff, KUBELET_BACKOFF } from './restart-policy.js';
import { agentNameProblem } from './workload.js';

export { DEFAULT_CONFIG_PATH, DEFAULT_SERVER_URL };

/** `$TMPDIR/ankaios/`, `/tmp/ankaios/` when TMPDIR is unset (as the 1.x agent). */
export const defaultRunFolder = (env: Readonly<Record<string, string | undefined>>): string => `${(env.TMPDIR || '/tmp').replace(/\/+$/, '')}/ankaios/`;

/** A setting the user got wrong; the message says which and how to mend it. */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly showHelp = false,
  ) {
    super(message);
  }
}

/** A PEM item: a file to read, or its content given in the config file. */
export type PemSource = { readonly path: string } | { readonly content: string; readonly key: string };

/** What both modes take from flags, environment and config file: everything but the server and how to reach it. */
export interface RunConfig {
  readonly name: string;
  readonly runFolder: string;
  /** Said to a 1.x server in the hello. */
  readonly tags: Readonly<Record<string, string>>;
  /** The runtimes to enable; undefined: all. */
  readonly runtimes?: readonly string[];
  /** How restarts of a workload that keeps exiting are spaced. */
  readonly crashLoopBackoff: CrashLoopBackoff;
  /** The agent runs the health checks of the workloads' commandOptions (false: they are left to the engine, as by the released agent). */
  readonly healthChecks: boolean;
  /**
   * Images are pulled ahead: an update's new one while the old instance runs, a waiting workload's while it
   * waits (`pull_ahead = false`: the released agent's order, the image pulled by the create).
   */
  readonly pullAhead: boolean;
  /** Each module's own settings (by module), made by its declaration (`Declared`) of the file's keys it reads and the environment. */
  readonly moduleSettings: ReadonlyMap<string, unknown>;
  /** When the agent collects the images it pulled (`image_gc`; false: never). */
  readonly imageGc?: ImageGcSettings;
  /** Where the metrics endpoint listens, if it is wanted. */
  readonly metrics?: string;
}

export interface AgentConfig extends RunConfig {
  readonly serverUrl: string;
  readonly security: { readonly insecure: true } | { readonly insecure: false; readonly ca: PemSource; readonly cert: PemSource; readonly key: PemSource };
}

export interface Flags {
  readonly name?: string;
  readonly serverUrl?: string;
  readonly runFolder?: string;
  readonly insecure?: boolean;
  readonly caPem?: string;
  readonly crtPem?: string;
  readonly keyPem?: string;
  /** `-t key=value`, repeatable. */
  readonly tags?: readonly string[];
  readonly metrics?: string;
}

export interface ConfigFile {
  readonly name?: string;
  readonly server_url?: string;
  readonly run_folder?: string;
  readonly insecure?: boolean;
  readonly ca_pem?: string;
  readonly crt_pem?: string;
  readonly key_pem?: string;
  readonly ca_pem_content?: string;
  readonly crt_pem_content?: string;
  readonly key_pem_content?: string;
  readonly tags?: Readonly<Record<string, string>>;
  readonly runtimes?: readonly string[];
  /** Seconds: `first_delay` (0: restart at once, always), `max_delay`, `reset_after`. */
  readonly crash_loop_backoff?: Readonly<Record<string, number>>;
  readonly health_checks?: boolean;
  readonly pull_ahead?: boolean;
  readonly image_gc?: boolean | Readonly<Record<string, number>>;
  readonly metrics?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** A key of the agent config that a module declares: the words of its type, and whether a value is of it. */
export interface DeclaredKey {
  readonly type: string;
  readonly is: (value: unknown) => boolean;
}

/**
 * What a module reads of the agent config file and of the environment, declared beside its code (a runtime
 * module's `settings`): its keys, and how its settings are made of them. The file is checked against every
 * module's keys as against the agent's own; each module gets its own settings.
 */
export interface Declared<T = unknown> {
  readonly keys: Readonly<Record<string, DeclaredKey>>;
  /** The settings, from the module's keys as the file gives them (absent ones absent) and the environment; throws ConfigError. */
  readonly parse: (given: Readonly<Record<string, unknown>>, env: Env) => T;
}

/** The modules' declarations, by module. */
export type Declarations = ReadonlyMap<string, Declared>;

type KeyType =
  | 'string'
  | 'boolean'
  | 'a table of strings'
  | 'a list of strings'
  | 'a table of seconds'
  | 'a table of high, low (percent) and min_age (seconds), or false';
const FILE_KEYS: Record<keyof ConfigFile | 'version', KeyType> = {
  version: 'string',
  name: 'string',
  server_url: 'string',
  run_folder: 'string',
  insecure: 'boolean',
  ca_pem: 'string',
  crt_pem: 'string',
  key_pem: 'string',
  ca_pem_content: 'string',
  crt_pem_content: 'string',
  key_pem_content: 'string',
  tags: 'a table of strings',
  runtimes: 'a list of strings',
  crash_loop_backoff: 'a table of seconds',
  health_checks: 'boolean',
  pull_ahead: 'boolean',
  image_gc: 'a table of high, low (percent) and min_age (seconds), or false',
  metrics: 'string',
};

/** The keys of `crash_loop_backoff`, in seconds. */
const BACKOFF_KEYS = { first_delay: 'firstDelayMs', max_delay: 'maxDelayMs', reset_after: 'resetAfterMs' } as const;

function hasType(value: unknown, type: KeyType): boolean {
  switch (type) {
    case 'a table of strings':
      return value !== null && typeof value === 'object' && !Array.isArray(value) && Object.values(value).every((v) => typeof v === 'string');
    case 'a list of strings':
      return Array.isArray(value) && value.every((v) => typeof v === 'string');
    case 'a table of high, low (percent) and min_age (seconds), or false':
      return (
        value === false ||
        (typeof value === 'object' &&
          value !== null &&
          typeof value === 'object' &&
          !Array.isArray(value) &&
          Object.entries(value).every(
            ([k, v]) =>
              typeof v === 'number' && Number.isFinite(v) && v >= 0 && ((k === 'min_age' && v <= 86_400 * 365) || ((k === 'high' || k === 'low') && v <= 100)),
          ))
      );
    case 'a table of seconds':
      return (
        value !== null &&
        typeof value === 'object' &&
        Object.entries(value).every(([k, v]) => k in BACKOFF_KEYS && typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= 86_400)
      );
    default:
      return typeof value === type;
  }
}

/**
 * Parses and checks the TOML agent config; `where` names it in messages. Unknown keys are only warned
 * about (the 1.x agent ignores them), so one file serves both agents.
 */
export function parseConfigFile(
  text: string,
  where: string,
  warn: (message: string) => void = () => undefined,
  declared: Declarations = new Map(),
): ConfigFile {
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`Cannot parse the agent config '${where}': ${(err as Error).message.split('\n')[0]}`);
  }
  const modules = new Map([...declared.values()].flatMap((d) => Object.entries(d.keys)));
  for (const [key, value] of Object.entries(doc)) {
    const type = FILE_KEYS[key as keyof typeof FILE_KEYS];
    const own = modules.get(key);
    if (own) {
      if (!own.is(value)) throw new ConfigError(`The key '${key}' in the agent config '${where}' must be ${own.type}.`);
    } else if (!type) {
      warn(`Unknown key '${key}' in the agent config '${where}' is ignored (known keys: ${[...Object.keys(FILE_KEYS), ...modules.keys()].join(', ')}).`);
      delete doc[key];
    } else if (!hasType(value, type)) {
      throw new ConfigError(
        `The key '${key}' in the agent config '${where}' must be ${/^[ab] /.test(type) ? type : `a ${type}`}${type === 'a table of seconds' ? ` (${Object.keys(BACKOFF_KEYS).join(', ')}: 0 to 86400)` : ''}.`,
      );
    }
  }
  if (doc.version !== 'v1') {
    throw new ConfigError(`The agent config '${where}' must say version = 'v1'${doc.version === undefined ? '' : `, not '${String(doc.version)}'`}.`);
  }
  for (const item of ['ca_pem', 'crt_pem', 'key_pem'] as const) {
    if (doc[item] !== undefined && doc[`${item}_content`] !== undefined) {
      throw new ConfigError(`The agent config '${where}' gives both '${item}' and '${item}_content': keep one.`);
    }
  }
  return doc as ConfigFile;
}

const TRUE_WORDS = ['true', 't', 'yes', 'y', 'on', '1'];
const FALSE_WORDS = ['false', 'f', 'no', 'n', 'off', '0'];

/** A boolean environment variable as the reference's parser reads it; anything else is an error, never a guess. */
function booleanFromEnv(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined || value === '') return undefined;
  if (TRUE_WORDS.includes(value.toLowerCase())) return true;
  if (FALSE_WORDS.includes(value.toLowerCase())) return false;
  throw new ConfigError(`Invalid ${name}='${value}': use true or false.`);
}

/** `http(s)://host[:port]`: a port, when given, must be possible; without one the scheme's (80, 443) is used, as by the released agent. */
function checkServerUrl(serverUrl: string): void {
  const m = /^https?:\/\/(\[[0-9a-fA-F:.]+\]|[^/:[\]]+)(?::(\d{1,5}))?\/?$/.exec(serverUrl);
  if (!m || (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 65535))) {
    throw new ConfigError(`Invalid server URL '${serverUrl}': it must start with http:// or https:// and name a host, and a port from 1 to 65535 if any.`);
  }
}

/** `key=value` tags from the command line; throws ConfigError naming a malformed one. */
export function parseTags(tags: readonly string[]): Record<string, string> {
  return Object.fromEntries(
    tags.map((tag) => {
      const at = tag.indexOf('=');
      if (at <= 0) throw new ConfigError(`Invalid tag '${tag}': give it as key=value.`);
      return [tag.slice(0, at), tag.slice(at + 1)];
    }),
  );
}

/**
 * The runtimes to enable out of those the agent has: all, or those the config lists. Names it does not
 * have are returned to be warned about; a list that names none it has is an error.
 */
export function selectRuntimes(available: readonly string[], wanted: readonly string[] | undefined): { enabled: string[]; unknown: string[] } {
  if (wanted === undefined) return { enabled: [...available], unknown: [] };
  const enabled = available.filter((r) => wanted.includes(r));
  const unknown = wanted.filter((r) => !available.includes(r));
  if (enabled.length === 0) {
    throw new ConfigError(
      `No runtime is enabled: 'runtimes' lists ${wanted.map((r) => `'${r}'`).join(', ') || 'nothing'}; this agent has ${available.map((r) => `'${r}'`).join(', ')}.`,
    );
  }
  return { enabled, unknown };
}

/** When the agent collects the images it pulled: above `high` % used, down to `low` %; never one younger than `minAgeMs`. */
export interface ImageGcSettings {
  readonly high: number;
  readonly low: number;
  readonly minAgeMs: number;
}

/** `image_gc`: kubelet's thresholds and minimum age unless the table says otherwise; false: no collection. */
function imageGcOf(given: ConfigFile['image_gc']): ImageGcSettings | undefined {
  if (given === false) return undefined;
  const table = given === true || given === undefined ? {} : given;
  const settings = {
    high: table.high ?? KUBELET_IMAGE_GC.high,
    low: table.low ?? KUBELET_IMAGE_GC.low,
    minAgeMs: table.min_age === undefined ? KUBELET_IMAGE_GC.minAgeMs : table.min_age * 1000,
  };
  if (settings.low > settings.high) throw new ConfigError(`image_gc.low (${settings.low} %) is above image_gc.high (${settings.high} %).`);
  return settings;
}

/** Each module's settings, by module, from the keys of the file it declared and the environment. */
export function moduleSettingsOf(declared: Declarations, file: ConfigFile, env: Env): Map<string, unknown> {
  const doc = file as Readonly<Record<string, unknown>>;
  return new Map(
    [...declared].map(([module, { keys, parse }]) => [
      module,
      parse(Object.fromEntries(Object.keys(keys).flatMap((k) => (k in doc ? [[k, doc[k]]] : []))), env),
    ]),
  );
}

/** The part of the config both modes read; `name` already chosen. Throws ConfigError on anything wrong. */
function runConfig(name: string | undefined, flags: Flags, env: Env, file: ConfigFile, declared: Declarations): RunConfig {
  if (name === undefined || name === '') throw new ConfigError('The agent name is missing: give it with -n/--name.', true);
  const nameProblem = agentNameProblem(name);
  if (nameProblem) throw new ConfigError(nameProblem);
  const runFolder = flags.runFolder ?? file.run_folder ?? defaultRunFolder(env);
  if (runFolder.trim() === '') throw new ConfigError('The run folder is empty: give a folder, or leave -r out for the default.');
  if (/^\/(proc|sys|dev)(\/|$)/.test(runFolder.replace(/\/+/g, '/')))
    throw new ConfigError(`The run folder '${runFolder}' is in a kernel file system: give a folder on disk.`);
  const tags = flags.tags && flags.tags.length > 0 ? parseTags(flags.tags) : { ...file.tags };
  const given = Object.entries(file.crash_loop_backoff ?? {}).map(([key, seconds]) => [BACKOFF_KEYS[key as keyof typeof BACKOFF_KEYS], seconds * 1000]);
  const crashLoopBackoff: CrashLoopBackoff = { ...KUBELET_BACKOFF, ...Object.fromEntries(given) };
  const metrics = flags.metrics ?? (env.ANKAGENT_METRICS || undefined) ?? file.metrics;
  return {
    name,
    runFolder,
    tags,
    runtimes: file.runtimes,
    crashLoopBackoff,
    healthChecks: file.health_checks ?? true,
    pullAhead: file.pull_ahead ?? true,
    moduleSettings: moduleSettingsOf(declared, file, env),
    imageGc: imageGcOf(file.image_gc),
    metrics,
  };
}

/**
 * Standalone mode's config: the same flags, environment and file as connected mode, with the same checks,
 * less the server's keys (not used without one). Without a name given, the manifest's agent (`manifestAgent`).
 */
export function resolveStandaloneConfig(
  flags: Flags,
  env: Readonly<Record<string, string | undefined>>,
  file: ConfigFile,
  manifestAgent: () => string,
  declared: Declarations = new Map(),
): RunConfig {
  return runConfig(flags.name ?? file.name ?? manifestAgent(), flags, env, file, declared);
}

/** Combines flags, environment and config file; throws ConfigError on anything wrong; `warn` hears of what is odd but works. */
export function resolveConfig(
  flags: Flags,
  env: Readonly<Record<string, string | undefined>>,
  file: ConfigFile = {},
  warn: (message: string) => void = () => undefined,
  declared: Declarations = new Map(),
): AgentConfig {
  const serverUrl = flags.serverUrl ?? file.server_url ?? DEFAULT_SERVER_URL;
  const common = { ...runConfig(flags.name ?? file.name, flags, env, file, declared), serverUrl };
  checkServerUrl(serverUrl);
  // Flag over environment over file, a `false` as much as a `true`.
  const insecure = flags.insecure || (booleanFromEnv('ANKAGENT_INSECURE', env.ANKAGENT_INSECURE) ?? file.insecure ?? false);

  const pem = (flag: string | undefined, envName: string, item: 'ca_pem' | 'crt_pem' | 'key_pem'): PemSource | undefined => {
    const path = flag ?? env[envName] ?? file[item];
    if (path) return { path };
    const content = file[`${item}_content`];
    return content ? { content, key: `${item}_content` } : undefined;
  };
  const ca = pem(flags.caPem, 'ANKAGENT_CA_PEM', 'ca_pem');
  const cert = pem(flags.crtPem, 'ANKAGENT_CRT_PEM', 'crt_pem');
  const key = pem(flags.keyPem, 'ANKAGENT_KEY_PEM', 'key_pem');
  if (insecure) {
    if (!ca && !cert && !key) return { ...common, security: { insecure: true } };
    // Some PEM files beside --insecure: a mistake the released agent refuses too (below); all three: mTLS.
    if (ca && cert && key) warn('Insecure communication was asked for, but the three PEM files are given too: the agent uses mTLS.');
  }
  if (!ca && !cert && !key) {
    // swdd~agent-fails-on-missing-file-paths-and-insecure-cli-arguments~1
    throw new ConfigError('No way to reach the server is given: either --insecure (-k) for plain text, or --ca_pem, --crt_pem and --key_pem for mTLS.', true);
  }
  const missing = [
    ['--ca_pem', ca],
    ['--crt_pem', cert],
    ['--key_pem', key],
  ]
    .filter(([, v]) => !v)
    .map(([f]) => f);
  if (missing.length > 0) throw new ConfigError(`mTLS needs all three PEM files; missing: ${missing.join(', ')}.`, true);
  return { ...common, security: { insecure: false, ca: ca!, cert: cert!, key: key! } };
}
