// What `--help` and `--version` print. It imports nothing of the agent, so bin/ank-agent.cjs answers them
// without loading it.
import { existsSync, readFileSync } from 'node:fs';
import { DEFAULT_CONFIG_PATH, DEFAULT_SERVER_URL, LINE_VERSIONS } from '../lib/defaults.js';

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
        --metrics <address>      Serve Prometheus metrics: a port (loopback), host:port,
                                 or a unix socket path            (env ANKAGENT_METRICS)
        --debug[=<stages>]       Trace the pipelines on stderr: all stages, or those named
                                 (server, workload, workload.loop, podman, logs, …)
        --help                   Show this help
        --version                Show the version and the protocol lines

  Flags override environment variables, which override the config file.

  Examples
    $ ank-agent -n agent_A -s http://127.0.0.1:25551 -k
    $ ank-agent --manifest examples/dependencies.yaml
`;

/** The agent's version and the protocol lines it speaks. */
export const versionText = (): string =>
  `ank-agent ${packageVersion()}\nprotocol lines: ${Object.entries(LINE_VERSIONS)
    .map(([line, version]) => `${line} (says ${version})`)
    .join(', ')}\n`;

/** The agent's version, from the nearest package.json above this file (the sources and the bundle sit at different depths). */
export function packageVersion(): string {
  for (let folder = new URL('.', import.meta.url); ; folder = new URL('..', folder)) {
    const file = new URL('package.json', folder);
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? '';
    if (folder.pathname === '/') return '';
  }
}
