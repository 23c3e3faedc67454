// The connected agent's start: only what the hello needs (the config, the credentials, the run folder, the call
// and its one message), before the rest of the agent is loaded (bin/main.ts).
import { closeSync, existsSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { encodeAgentHello } from '../lib/codec/hello.js';
import { RUNTIME_SETTINGS } from './settings.js';
import { type AgentConfig, ConfigError, type ConfigFile, DEFAULT_CONFIG_PATH, defaultRunFolder, parseConfigFile, resolveConfig } from '../lib/config.js';
import { LINE_VERSIONS } from '../lib/defaults.js';
import { type Security, openEarly } from '../lib/drivers/grpc-call.js';
import { prepareRunFolder } from '../lib/drivers/run-folder.js';
import { loadSecurity, pemModeProblem } from '../lib/drivers/security.js';
import { logLine } from '../lib/logger.js';
import type { CommandLine } from './command-line.js';
import { userErrors } from './exit.js';

/** What the connected setting's start made before the rest of the agent was loaded. */
export interface EarlyStart {
  readonly config: AgentConfig;
  readonly security: Security;
  readonly ioFolder: string;
  /** Hands the signals over: the start's handlers go (call it once the run's are on), and the signal they caught, if any, is told. */
  readonly handOverSignals: () => NodeJS.Signals | undefined;
}

/** The signals that stop the agent. */
export const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** How long the start waits for its hello to go out before it loads the rest anyway (a server slow to accept). */
const HELLO_WAIT_MS = 2000;

/** A line in the agent's log format, before its logger is loaded. */
const say = (level: 'info' | 'warn', message: string) => process.stderr.write(`${logLine(new Date().toISOString(), level, message)}\n`);

/**
 * swdd~agent-sends-hello~1: the config, the credentials and the run folder, then the call to the server opened
 * with its hello on the first protocol line (bin/run.ts's link takes the call over, and negotiates from there).
 */
export async function helloFirst(flags: CommandLine): Promise<EarlyStart> {
  const { config, security, ioFolder } = userErrors(() => {
    const config = configOf(flags);
    return {
      config,
      security: loadSecurity(config.security),
      ioFolder: prepareRunFolder(config.runFolder, config.name, config.runFolder === defaultRunFolder(process.env)),
    };
  });
  // A signal while the agent starts is kept for the run, which stops as it would have (the call fails at the server).
  let caught: NodeJS.Signals | undefined;
  const keep = (signal: NodeJS.Signals) => (caught ??= signal);
  for (const signal of SIGNALS) process.on(signal, keep);
  const handOverSignals = () => {
    for (const signal of SIGNALS) process.off(signal, keep);
    return caught;
  };
  const sent = openEarly({ serverUrl: config.serverUrl, security }, encodeAgentHello(config.name, LINE_VERSIONS['1'], config.tags));
  say('info', `Agent '${config.name}' connecting to ${config.serverUrl}${security.insecure ? ' (insecure)' : ''}.`);
  let waited: NodeJS.Timeout | undefined;
  await Promise.race([sent, new Promise((resolve) => (waited = setTimeout(resolve, HELLO_WAIT_MS)))]);
  clearTimeout(waited);
  return { config, security, ioFolder, handOverSignals };
}

/** The agent's config: its flags over the environment over the config file. */
function configOf(flags: CommandLine): AgentConfig {
  if (flags.input.length > 0) throw new ConfigError(`Unexpected argument '${flags.input[0]}'.`, true);
  const { name, serverUrl, runFolder, insecure, caPem, crtPem, keyPem, tag: tags, metrics } = flags;
  const warn = (warning: string) => say('warn', warning);
  return resolveConfig(
    { name, serverUrl, runFolder, insecure, caPem, crtPem, keyPem, tags, metrics },
    process.env,
    readConfigFile(flags.agentConfig, warn),
    warn,
    RUNTIME_SETTINGS,
  );
}

/** The agent config file (the one given, else the default one where it exists), read once; `warn` hears what is odd. */
export function readConfigFile(given: string | undefined, warn: (warning: string) => void): ConfigFile {
  const file = given ?? (existsSync(DEFAULT_CONFIG_PATH) ? DEFAULT_CONFIG_PATH : undefined);
  if (file === undefined) return {};
  let text: string;
  let mode: number;
  try {
    const fd = openSync(file, 'r');
    try {
      mode = fstatSync(fd).mode;
      text = readFileSync(fd, 'utf8');
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw new ConfigError(`Cannot read the agent config '${file}': ${(err as Error).message}`);
  }
  const config = parseConfigFile(text, file, warn, RUNTIME_SETTINGS);
  // swdd~grpc-checks-given-PEM-file-for-proper-unix-file-permission~2: a file that holds the key is held to the key file's rule.
  const problem = config.key_pem_content === undefined ? undefined : pemModeProblem(mode, 'agent key');
  if (problem) throw new ConfigError(`The agent config '${file}' holds the agent key ('key_pem_content') and ${problem}.`);
  return config;
}
