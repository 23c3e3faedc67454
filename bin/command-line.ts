// The agent's command line, read by Node's own parser: a third-party one stayed resident with its
// dependencies for the whole life of the process (about 4 MiB of an idle agent's RSS).
import { existsSync, readFileSync } from 'node:fs';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { DEFAULT_CONFIG_PATH, DEFAULT_SERVER_URL } from '../lib/config.js';

export const HELP = `
  Usage
    $ ank-agent -n <name> (-k | --ca_pem <file> --crt_pem <file> --key_pem <file>) [options]
    $ ank-agent --manifest <file.yaml> [-n <name>] [options]

  The Ankaios agent: runs the workloads an Ankaios server assigns to this node, or,
  with --manifest, the workloads of an Ankaios manifest without a server.

  Options
    -n, --name <name>            Agent name (letters, digits, '-' and '_')
    -s, --server-url <url>       Server URL (default ${DEFAULT_SERVER_URL})
    -r, --run-folder <folder>    Working folder (default $TMPDIR/ankaios/, /tmp/ankaios/ without TMPDIR)
    -t, --tag <key=value>        A tag of this agent, said to 1.x servers (repeatable)
    -x, --agent-config <file>    TOML config file (default ${DEFAULT_CONFIG_PATH}, when it exists)
    -k, --insecure               Talk to the server in plain text      (env ANKAGENT_INSECURE)
        --ca_pem <file>          CA certificate for mTLS               (env ANKAGENT_CA_PEM)
        --crt_pem <file>         Agent certificate for mTLS            (env ANKAGENT_CRT_PEM)
        --key_pem <file>         Agent private key for mTLS            (env ANKAGENT_KEY_PEM)
    -m, --manifest <file>        Standalone: run this manifest, no server; edits are applied
        --delete-on-exit         Standalone: delete the workloads when the agent stops
        --debug                  Trace the pipelines on stderr
        --help                   Show this help
        --version                Show the version and the protocol lines

  Flags override environment variables, which override the config file.

  Examples
    $ ank-agent -n agent_A -s http://127.0.0.1:25551 -k
    $ ank-agent --manifest examples/dependencies.yaml
`;

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
  debug: { type: 'boolean' },
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
  readonly debug: boolean;
  readonly help: boolean;
  readonly version: boolean;
  /** Arguments that are no flag (none is expected). */
  readonly input: readonly string[];
}

/** The flags of `args`; a flag the agent does not know, or one without its value, throws (Node's words name it). */
export function readCommandLine(args: readonly string[]): CommandLine {
  const { values: v, positionals } = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
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
    debug: v.debug ?? false,
    help: v.help ?? false,
    version: v.version ?? false,
    input: positionals,
  };
}

/** The agent's version, from the nearest package.json above this file (the sources and the bundle sit at different depths). */
export function packageVersion(): string {
  for (let folder = new URL('.', import.meta.url); ; folder = new URL('..', folder)) {
    const file = new URL('package.json', folder);
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? '';
    if (folder.pathname === '/') return '';
  }
}
