// ank-agent: flags and config → drivers → agent → subscribe. The only subscribe of the program.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import meow from 'meow';
import { Subject } from 'rxjs';
import {
  type AgentConfig, ConfigError, type ConfigFile, DEFAULT_CONFIG_PATH, DEFAULT_RUN_FOLDER, DEFAULT_SERVER_URL,
  parseConfigFile, resolveConfig,
} from '../lib/config.js';
import { connectAgent } from '../lib/drivers/grpc-connection.js';
import { createLogger } from '../lib/drivers/log.js';
import { loadSecurity } from '../lib/drivers/security.js';
import { ControlInterfaces } from '../lib/drivers/control-interfaces.js';
import { builtInRuntimes } from '../lib/drivers/runtimes.js';
import { runAgent } from '../streams/agent.js';
import { ServerRefused } from '../streams/server-link.js';
import { noTrace, tracer } from '../streams/trace.js';

const HELP = `
  Usage
    $ ank-agent -n <name> (-k | --ca_pem <file> --crt_pem <file> --key_pem <file>) [options]

  The Ankaios agent: runs the workloads an Ankaios server assigns to this node.

  Options
    -n, --name <name>            Agent name (letters, digits, '-' and '_')
    -s, --server-url <url>       Server URL (default ${DEFAULT_SERVER_URL})
    -r, --run-folder <folder>    Working folder (default ${DEFAULT_RUN_FOLDER})
    -x, --agent-config <file>    TOML config file (default ${DEFAULT_CONFIG_PATH}, when it exists)
    -k, --insecure               Talk to the server in plain text      (env ANKAGENT_INSECURE)
        --ca_pem <file>          CA certificate for mTLS               (env ANKAGENT_CA_PEM)
        --crt_pem <file>         Agent certificate for mTLS            (env ANKAGENT_CRT_PEM)
        --key_pem <file>         Agent private key for mTLS            (env ANKAGENT_KEY_PEM)
        --debug                  Trace the pipelines on stderr
        --help                   Show this help
        --version                Show the version

  Flags override environment variables, which override the config file.

  Example
    $ ank-agent -n agent_A -s http://127.0.0.1:25551 -k
`;

const cli = meow(HELP, {
  importMeta: import.meta,
  allowUnknownFlags: false,
  flags: {
    name: { type: 'string', shortFlag: 'n' },
    serverUrl: { type: 'string', shortFlag: 's' },
    runFolder: { type: 'string', shortFlag: 'r' },
    agentConfig: { type: 'string', shortFlag: 'x' },
    insecure: { type: 'boolean', shortFlag: 'k' },
    ca_pem: { type: 'string' },
    crt_pem: { type: 'string' },
    key_pem: { type: 'string' },
    debug: { type: 'boolean', default: false },
  },
});

function fail(message: string, showHelp = false): never {
  process.stderr.write(`ank-agent: error: ${message}\n${showHelp ? HELP : ''}`);
  process.exit(1);
}

function readConfigFile(): ConfigFile {
  const file = cli.flags.agentConfig ?? (existsSync(DEFAULT_CONFIG_PATH) ? DEFAULT_CONFIG_PATH : undefined);
  if (file === undefined) return {};
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`Cannot read the agent config '${file}': ${(err as Error).message}`);
  }
  return parseConfigFile(text, file);
}

function configure(): { config: AgentConfig; security: ReturnType<typeof loadSecurity> } {
  try {
    if (cli.input.length > 0) throw new ConfigError(`Unexpected argument '${cli.input[0]}'.`, true);
    // meow hands the `--ca_pem` style flags over camel-cased.
    const f = cli.flags as typeof cli.flags & { caPem?: string; crtPem?: string; keyPem?: string };
    const config = resolveConfig(
      { name: f.name, serverUrl: f.serverUrl, runFolder: f.runFolder, insecure: f.insecure, caPem: f.caPem, crtPem: f.crtPem, keyPem: f.keyPem },
      process.env,
      readConfigFile(),
    );
    return { config, security: loadSecurity(config.security) };
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message, err.showHelp);
    throw err;
  }
}

const { config, security } = configure();
const log = createLogger(cli.flags.debug);
const ioFolder = path.join(config.runFolder, `${config.name}_io`);
try {
  mkdirSync(ioFolder, { recursive: true });
} catch (err) {
  fail(`Cannot prepare the run folder '${ioFolder}': ${(err as Error).message}`);
}

const runtimes = builtInRuntimes(log);
const controlInterfaces = new ControlInterfaces(ioFolder, log);
const stop$ = new Subject<void>();
const STOP_GRACE_MS = 3000;

log.info(`Agent '${config.name}' connecting to ${config.serverUrl}${security.insecure ? ' (insecure)' : ''}.`);
runAgent({
  agentName: config.name,
  runtimes,
  prepare: (spec) => controlInterfaces.prepare(spec),
  release: (spec) => controlInterfaces.release(spec),
  controlInterfaces,
  connect: (outbound$) => connectAgent({ serverUrl: config.serverUrl, security }, outbound$),
  log,
  stop$,
  trace: cli.flags.debug ? tracer(log) : noTrace,
}).subscribe({
  error: (err: unknown) => {
    log.error(err instanceof ServerRefused ? err.message : `The agent failed: ${String(err)}`);
    process.exit(1);
  },
  complete: () => process.exit(0),
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log.info(`${signal}: saying goodbye to the server; the workloads keep running.`);
    stop$.next();
    controlInterfaces.closeAll();
    setTimeout(() => process.exit(0), STOP_GRACE_MS).unref();
  });
}
