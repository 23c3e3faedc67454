// ank-agent: flags and config → drivers → agent → subscribe. The only subscribe of the program.
import { existsSync, readFileSync } from 'node:fs';
import { BehaviorSubject, type Observable, Subject, concat, merge, of, startWith, takeUntil, tap, timer } from 'rxjs';
import {
  CONTAINERD_MISSING,
  ConfigError,
  type ConfigFile,
  DEFAULT_CONFIG_PATH,
  defaultRunFolder,
  parseConfigFile,
  resolveConfig,
  selectRuntimes,
} from '../lib/config.js';
import { PROTOCOL_LINES } from '../lib/codec/lines.js';
import { ControlInterfacePipes } from '../lib/drivers/control-interface-pipes.js';
import { prepareRunFolder } from '../lib/drivers/run-folder.js';
import { connectAgent } from '../lib/drivers/grpc-connection.js';
import { hostSide } from '../lib/drivers/host-side.js';
import { createLogger } from '../lib/drivers/log.js';
import { sampleMachine } from '../lib/drivers/machine.js';
import { loadSecurity } from '../lib/drivers/security.js';
import { readManifest, statusView, watchManifest } from '../lib/drivers/standalone.js';
import { WorkloadFiles } from '../lib/drivers/workload-files.js';
import type { Logger } from '../lib/logger.js';
import { type DesiredState, ManifestError } from '../lib/manifest.js';
import type { FromServer, ToServer } from '../lib/messages.js';
import type { RuntimeConnector } from '../lib/runtime-connector.js';
import { agentNameProblem } from '../lib/workload.js';
import type { LocalSnapshot } from '../lib/status.js';
import { type AgentDeps, type AgentSinks, agent } from '../streams/agent.js';
import { localServer } from '../streams/local-server.js';
import { ServerRefused, serverLink } from '../streams/server-link.js';
import { noTrace, tracer } from '../streams/trace.js';
import { HELP, packageVersion, readCommandLine } from './command-line.js';
import { builtInRuntimes } from './wiring.js';

/** Where the server's messages come from: the gRPC server link, or the local server of standalone mode. */
type Link = (toServer$: Observable<ToServer>, greeting: () => ToServer[]) => Observable<FromServer>;

/** What the run holds that must be let go before the process ends (the Control Interfaces). */
const disposers: Array<() => void> = [];

/** The one way out: what the run holds is let go, then the process ends with `code`. */
function shutdown(code: number): never {
  for (const dispose of disposers.splice(0)) dispose();
  process.exit(code);
}

function fail(message: string, showHelp = false): never {
  process.stderr.write(`ank-agent: error: ${message}\n${showHelp ? HELP : ''}`);
  shutdown(1);
}

/** Runs `body`, turning the user's mistakes into a clear message and exit code 1. */
function userErrors<T>(body: () => T): T {
  try {
    return body();
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message, err.showHelp);
    if (err instanceof ManifestError) fail(err.message);
    throw err;
  }
}

/** The flags; a command line Node's parser refuses ends the process with its reason and the help. */
const flags = (() => {
  try {
    return readCommandLine(process.argv.slice(2));
  } catch (err) {
    return fail((err as Error).message, true);
  }
})();

function readConfigFile(log: Logger): ConfigFile {
  const file = flags.agentConfig ?? (existsSync(DEFAULT_CONFIG_PATH) ? DEFAULT_CONFIG_PATH : undefined);
  if (file === undefined) return {};
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`Cannot read the agent config '${file}': ${(err as Error).message}`);
  }
  return parseConfigFile(text, file, (warning) => log.warn(warning));
}

/**
 * Runs the agent with the given link until it ends; the signals stop it. The drivers are wired to the
 * agent's sources and sinks here, and the loop from its messages back to the link is closed here.
 */
function run(name: string, ioFolder: string, log: Logger, link: Link, onSignal: () => void, extra: Partial<AgentDeps> = {}): void {
  const pipes = new ControlInterfacePipes(ioFolder, log);
  disposers.push(() => pipes.closeAll());
  const host = hostSide(ioFolder, pipes, new WorkloadFiles(ioFolder));
  const deps: AgentDeps = {
    agentName: name,
    runtimes: builtInRuntimes(log),
    prepare: (spec) => host.prepare(spec),
    release: (spec) => host.release(spec),
    log,
    trace: flags.debug ? tracer(log) : noTrace,
    jitter: Math.random,
    ...extra,
  };
  deps.serverFull$?.subscribe((full) => pipes.setPaused(full));
  const toServer$ = new Subject<ToServer>();
  let sinks: AgentSinks | undefined;
  sinks = agent({ fromServer$: link(toServer$, () => sinks?.greeting() ?? []), controlInterfaces$: pipes.opened$, undelivered$: pipes.undelivered$ }, deps);
  merge(sinks.toServer$.pipe(tap((m) => toServer$.next(m))), sinks.toWorkloads$.pipe(tap((frame) => pipes.write(frame)))).subscribe({
    error: (err: unknown) => {
      log.error(err instanceof ServerRefused ? err.message : `The agent failed: ${String(err)}`);
      shutdown(1);
    },
    complete: () => shutdown(0),
  });
  // A lasting listener (not `once`): execa's exit cleanup re-raises signals nobody else listens to.
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log.info(`${signal}: stopping.`);
      pipes.closeAll();
      onSignal();
    });
  }
}

/** The built-in runtimes the config enables (all by default); names it does not know are warned about. */
function enabledRuntimes(log: Logger, wanted: readonly string[] | undefined): Map<string, RuntimeConnector> {
  const all = builtInRuntimes(log);
  const { enabled, unknown } = userErrors(() => selectRuntimes([...all.keys()], wanted));
  for (const name of unknown)
    log.warn(`The config names the runtime '${name}', which this agent does not have: ignored.${name === 'containerd' ? ` ${CONTAINERD_MISSING}` : ''}`);
  return new Map(enabled.map((name) => [name, all.get(name)!]));
}

function connected(): void {
  const log = createLogger(flags.debug);
  const { config, security } = userErrors(() => {
    if (flags.input.length > 0) throw new ConfigError(`Unexpected argument '${flags.input[0]}'.`, true);
    const config = resolveConfig(
      {
        name: flags.name,
        serverUrl: flags.serverUrl,
        runFolder: flags.runFolder,
        insecure: flags.insecure,
        caPem: flags.caPem,
        crtPem: flags.crtPem,
        keyPem: flags.keyPem,
        tags: flags.tag,
      },
      process.env,
      readConfigFile(log),
      (warning) => log.warn(warning),
    );
    return { config, security: loadSecurity(config.security) };
  });
  const runtimes = enabledRuntimes(log, config.runtimes);
  const ioFolder = userErrors(() => prepareRunFolder(config.runFolder, config.name, config.runFolder === defaultRunFolder(process.env)));
  const stop$ = new Subject<void>();
  // While the server connection cannot take more, neither the Control Interfaces nor the log streams are read.
  const serverFull$ = new BehaviorSubject(false);
  log.info(`Agent '${config.name}' connecting to ${config.serverUrl}${security.insecure ? ' (insecure)' : ''}.`);
  run(
    config.name,
    ioFolder,
    log,
    (outbound$, greeting) =>
      serverLink(
        (wire$, line) => connectAgent({ serverUrl: config.serverUrl, security, line, onBackpressure: (full) => serverFull$.next(full) }, wire$),
        outbound$,
        { agentName: config.name, log, stop$, greeting, tags: config.tags },
      ),
    () => {
      // The stream is cancelled, so the server marks the agent gone; the workloads keep running and
      // are resumed at the next start.
      stop$.next();
      setTimeout(() => shutdown(0), 3000).unref();
    },
    { sampleMachine, runtimes, serverFull$ },
  );
}

/** The agent a manifest is for, when -n does not say: the one agent its workloads name. */
function agentOf(desired: DesiredState): string {
  const agents = new Set([...desired.workloads.values()].map((w) => w.spec.instanceName.agentName).filter((a) => a !== ''));
  if (agents.size === 1) return [...agents][0];
  if (agents.size === 0) return 'standalone';
  throw new ConfigError(`The manifest names the agents ${[...agents].sort().join(', ')}: say which one this is with -n.`);
}

function standalone(manifestFile: string): void {
  const log = createLogger(flags.debug);
  const { name, first } = userErrors(() => {
    const first = readManifest(manifestFile, log);
    const name = flags.name ?? agentOf(first);
    const problem = agentNameProblem(name);
    if (problem) throw new ConfigError(problem);
    return { name, first };
  });
  const ioFolder = userErrors(() => prepareRunFolder(flags.runFolder ?? defaultRunFolder(process.env), name, flags.runFolder === undefined));
  const stop$ = new Subject<void>();
  const view = statusView(name, process.stdout, log);
  let snapshot: LocalSnapshot = { states: new Map() };
  const empty: DesiredState = { apiVersion: first.apiVersion, workloads: new Map(), configs: {} };
  // --delete-on-exit: on stop, an empty manifest deletes every workload before the agent ends.
  const manifests$: Observable<DesiredState> = flags.deleteOnExit
    ? concat(watchManifest(manifestFile, first, log).pipe(takeUntil(stop$)), of(empty))
    : watchManifest(manifestFile, first, log);
  log.info(`Agent '${name}' running the manifest '${manifestFile}' without a server.`);
  // The local server is there from the start, and a workload may speak either protocol line to it.
  run(
    name,
    ioFolder,
    log,
    (outbound$) =>
      localServer(manifests$, outbound$, {
        agentName: name,
        log,
        onSnapshot: (s) => {
          snapshot = s;
          view(s);
        },
      }).pipe(startWith<FromServer>({ kind: 'connected', lines: PROTOCOL_LINES })),
    () => {
      if (!flags.deleteOnExit) shutdown(0);
      log.info('Deleting the workloads before stopping (--delete-on-exit).');
      stop$.next();
      const check = timer(0, 200).subscribe(() => {
        if (snapshot.states.size === 0) {
          check.unsubscribe();
          shutdown(0);
        }
      });
      setTimeout(() => {
        log.error('Not every workload was deleted within 60 s.');
        shutdown(1);
      }, 60_000).unref();
    },
  );
}

if (flags.help) {
  process.stdout.write(HELP);
  shutdown(0);
}
if (flags.version) {
  process.stdout.write(`ank-agent ${packageVersion()}\nprotocol lines: ${PROTOCOL_LINES.map((l) => `${l.name} (says ${l.version})`).join(', ')}\n`);
  shutdown(0);
}
if (flags.manifest !== undefined) standalone(flags.manifest);
else connected();
