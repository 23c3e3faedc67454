// The agent's command line, read by Node's own parser: a third-party one stayed resident with its
// dependencies for the whole life of the process (about 4 MiB of an idle agent's RSS).
import { type ParseArgsConfig, parseArgs } from 'node:util';

const OPTIONS = {
  name: { type: 'string', short: 'n' },
  'server-url': { type: 'string', short: 's' },
  'run-folder': { type: 'string', short: 'r' },
  tag: { type: 'string', short: 't', multiple: true },
  'agent-config': { type: 'string', short: 'x' },
  insecure: { type: 'boolean', short: 'k' },
  ca_pem: { type: 'string' },
  crt_pem: { type: 'string' },
  key_pem: { type: 'string' },
  manifest: { type: 'string', short: 'm' },
  'delete-on-exit': { type: 'boolean' },
  metrics: { type: 'string' },
  debug: { type: 'string' },
  help: { type: 'boolean' },
  version: { type: 'boolean' },
} as const satisfies ParseArgsConfig['options'];

export interface CommandLine {
  readonly name?: string;
  readonly serverUrl?: string;
  readonly runFolder?: string;
  readonly tag?: readonly string[];
  readonly agentConfig?: string;
  readonly insecure?: boolean;
  readonly caPem?: string;
  readonly crtPem?: string;
  readonly keyPem?: string;
  readonly manifest?: string;
  readonly deleteOnExit: boolean;
  readonly metrics?: string;
  /** The stages `--debug` traces (`all` for a bare --debug); none without it. */
  readonly debug: readonly string[];
  readonly help: boolean;
  readonly version: boolean;
  /** Arguments that are no flag (none is expected). */
  readonly input: readonly string[];
}

/** The flags of `args`; a flag the agent does not know, or one without its value, throws (Node's words name it). */
export function readCommandLine(args: readonly string[]): CommandLine {
  // A bare --debug traces every stage.
  const given = args.map((a) => (a === '--debug' ? '--debug=all' : a));
  const { values: v, positionals } = parseArgs({ args: given, options: OPTIONS, allowPositionals: true, strict: true });
  return {
    name: v.name,
    serverUrl: v['server-url'],
    runFolder: v['run-folder'],
    tag: v.tag,
    agentConfig: v['agent-config'],
    insecure: v.insecure,
    caPem: v.ca_pem,
    crtPem: v.crt_pem,
    keyPem: v.key_pem,
    manifest: v.manifest,
    deleteOnExit: v['delete-on-exit'] ?? false,
    metrics: v.metrics,
    debug:
      v.debug === undefined
        ? []
        : v.debug
            .split(',')
            .map((stage) => stage.trim())
            .filter(Boolean),
    help: v.help ?? false,
    version: v.version ?? false,
    input: positionals,
  };
}
