// The agent's run, loaded once its start (bin/main.ts) has said hello to the server, or at once without one:
// the agent's setting (connected or standalone) → drivers → agent() → one subscription.
import {
  BehaviorSubject,
  NEVER,
  type Observable,
  ReplaySubject,
  Subject,
  concat,
  delay,
  first,
  lastValueFrom,
  merge,
  of,
  startWith,
  switchMap,
  takeUntil,
  tap,
  throwError,
  timeout,
  type SchedulerLike,
  asyncScheduler,
} from 'rxjs';
import { PROTOCOL_LINES } from '../lib/codec/lines.js';
import { ConfigError, type RunConfig, defaultRunFolder, resolveStandaloneConfig, selectRuntimes } from '../lib/config.js';
import { ControlInterfacePipes } from '../lib/drivers/control-interface-pipes.js';
import type { MetricsEndpoint } from '../lib/drivers/metrics.js';
import { Processes } from '../lib/drivers/processes.js';
import { connectAgent } from '../lib/drivers/grpc-connection.js';
import { hostSide } from '../lib/drivers/host-side.js';
import { createLogger } from '../lib/drivers/log.js';
import { sampleMachine } from '../lib/drivers/machine.js';
import { prepareRunFolder } from '../lib/drivers/run-folder.js';
import { readManifest, statusView, watchManifest } from '../lib/drivers/standalone.js';
import { WorkloadFiles } from '../lib/drivers/workload-files.js';
import type { Logger } from '../lib/logger.js';
import type { DesiredState } from '../lib/desired-state.js';
import type { FromServer, ToServer } from '../lib/messages.js';
import type { MachineSample } from '../lib/ports.js';
import type { CrashLoopBackoff } from '../lib/restart-policy.js';
import { RunningWorkloads } from '../lib/running-workloads.js';
import type { LocalSnapshot } from '../lib/status.js';
import { agent } from '../streams/agent.js';
import { localServer } from '../streams/local-server.js';
import { type Connect, ServerRefused, serverLink } from '../streams/server-link.js';
import { type Trace, noTrace, stageFilter, tracer } from '../streams/trace.js';
import { packageVersion } from './about.js';
import { EarlyEnd, type Outcome, userErrors } from './exit.js';
import { RUNTIME_SETTINGS } from './settings.js';
import { type EarlyStart, SIGNALS, readConfigFile } from './start.js';
import type { CommandLine } from './command-line.js';
import { type MadeRuntimes, type RuntimeWiring, makeRuntimes } from './wiring.js';

/** What a setting of the agent gives the run: who it is, where it works, and its link to a server. */
interface Setting {
  readonly name: string;
  readonly ioFolder: string;
  /** The runtimes it enables (all when not said), and whether the agent runs the workloads' health checks. */
  readonly runtimes: Pick<RuntimeWiring, 'health' | 'settings' | 'imageGc'> & { readonly wanted?: readonly string[] };
  readonly backoff?: CrashLoopBackoff;
  /** Images are pulled ahead: an update's before its old instance stops, a waiting workload's while it waits. */
  readonly pullAhead: boolean;
  /** Where the metrics endpoint listens, if it is wanted. */
  readonly metrics?: string;
  /** The server's messages, given what the agent says; ends when the agent is to end. */
  readonly link: (toServer$: Observable<ToServer>) => Observable<FromServer>;
  /** Tells the link to end (a signal came); the process ends when it has, or after `stopWithinMs`. */
  readonly stop: () => void;
  readonly stopWithinMs?: number;
  readonly sampleMachine?: () => MachineSample;
  /** True while the server connection cannot take more (nothing of the workloads is read then). */
  readonly serverFull$?: Observable<boolean>;
}

/** A reason to end that is told as it is, without "the agent failed". */
class Ending extends Error {}

/** A run under way: how it ended, once it has and all it held is let go, and its dispose, which ends it at once. */
export interface Run {
  readonly done: Promise<Outcome>;
  /** Lets go of all the run holds: its subscription, pipes, runtimes, process driver, endpoint and signal handlers. */
  readonly dispose: () => void;
}

/**
 * Runs the agent the command line asks for; `early`: the connected setting's start, done before this module was
 * loaded (bin/main.ts: the hello went out first). `ended` hears the outcome in the very turn the run ended (the
 * program's exit: bin/exit.ts says why it must be that turn), after the run's dispose.
 */
export async function run(flags: CommandLine, early?: EarlyStart, ended?: (outcome: Outcome) => void): Promise<Run> {
  const log = createLogger(flags.debug.length > 0);
  const trace = flags.debug.length > 0 ? tracer(log, stageFilter(flags.debug)) : noTrace;
  const setting = userErrors(() => (early ? connected(early, log) : standalone(flags, flags.manifest!, log)));
  // What the control loops run, shared with the metrics (whose pod is whose).
  const running = new RunningWorkloads();
  // The metrics are told what the runtimes do from the start; the endpoint asks the runtimes for their figures.
  let metrics: MetricsEndpoint | undefined;
  // What runs the runtimes' processes, for the whole run: disposed with the runtimes at its end.
  const processes = new Processes({ warn: (text) => log.warn(text) });
  // The run's one clock and its timers, handed to the runtimes and the control loops.
  const scheduler = asyncScheduler;
  const runtimes = userErrors(() =>
    enabledRuntimes(log, setting.runtimes, {
      scheduler,
      folder: setting.ioFolder,
      processes,
      trace,
      observeCall: (call) => metrics?.apply({ kind: 'cliCall', call }),
      eventsRestarted: (engine) => metrics?.apply({ kind: 'eventsRestarted', engine }),
      images: (engine, change) => metrics?.apply({ kind: 'images', engine, ...change }),
    }),
  );
  try {
    metrics = setting.metrics === undefined ? undefined : await metricsEndpoint(setting, log, running, runtimes);
  } catch (err) {
    // Refused after the runtimes were made: what they began for the run (the Podman service) goes with the agent.
    runtimes.dispose();
    throw err;
  }
  const endpoint = metrics;
  let told!: (outcome: Outcome) => void;
  const done = new Promise<Outcome>((resolve) => (told = resolve));
  let agentRun: AgentRun | undefined;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    agentRun?.letGo();
    runtimes.dispose();
    processes.dispose();
    endpoint?.close();
  };
  agentRun = runAgent(setting, runtimes.connectors, log, { scheduler, trace, metrics, running, handOverSignals: early?.handOverSignals }, (outcome) => {
    release();
    told(outcome);
    ended?.(outcome);
    // Last, where `ended` did not end the process: until then a signal that comes again finds the agent stopping,
    // not Node's default, which would end it half let go.
    agentRun?.forgetSignals();
  });
  // Ended from outside: as a stop that nothing went wrong in (the promise keeps the first outcome told).
  return {
    done,
    dispose: () => {
      release();
      agentRun?.forgetSignals();
      told({ code: 0 });
    },
  };
}

/** The metrics endpoint, loaded only when it is wanted; one that cannot listen ends the agent with the reason. */
async function metricsEndpoint(setting: Setting, log: Logger, running: RunningWorkloads, runtimes: MadeRuntimes): Promise<MetricsEndpoint> {
  const { startMetrics } = await import('../lib/drivers/metrics.js');
  try {
    return await startMetrics(setting.metrics!, {
      agentName: setting.name,
      version: packageVersion(),
      log,
      containerStats: () => lastValueFrom(runtimes.figures(setting.name, running)),
    });
  } catch (err) {
    throw new EarlyEnd({ code: 1, say: `ank-agent: error: Cannot serve the metrics: ${(err as Error).message}\n` });
  }
}

/** What the run gives the agent beside its setting: the tracer, the metrics, the running workloads, the start's signals. */
interface RunParts {
  readonly scheduler: SchedulerLike;
  readonly trace: Trace;
  readonly metrics?: MetricsEndpoint;
  readonly running: RunningWorkloads;
  readonly handOverSignals?: () => NodeJS.Signals | undefined;
}

/** What lets go of the agent's run: its subscription and pipes, and apart from them its signal handlers. */
interface AgentRun {
  readonly letGo: () => void;
  readonly forgetSignals: () => void;
}

/**
 * The drivers wired to agent(), and the one subscription; `ended` is told how it ended (the link ended, a signal's
 * deadline passed, or the agent failed), in that very turn. Returns what lets go of them. The Subject closes the
 * loop from what the agent says back into its link: the link's input is the agent's output, which no stream built
 * before it can be.
 */
function runAgent(setting: Setting, connectors: MadeRuntimes['connectors'], log: Logger, parts: RunParts, ended: (outcome: Outcome) => void): AgentRun {
  const { scheduler, trace, metrics, running, handOverSignals } = parts;
  const pipes = new ControlInterfacePipes(setting.ioFolder, log, setting.serverFull$);
  const host = hostSide(setting.ioFolder, pipes, new WorkloadFiles(setting.ioFolder));
  const toServer$ = new Subject<ToServer>();
  const stopping$ = new Subject<void>();
  const sinks = agent(
    { fromServer$: setting.link(toServer$), controlInterfaces$: pipes.opened$, undelivered$: pipes.undelivered$ },
    {
      agentName: setting.name,
      runtimes: connectors,
      scheduler,
      prepare: (spec) => host.prepare(spec),
      release: (spec) => host.release(spec),
      discard: (spec) => host.discard(spec),
      log,
      trace,
      jitter: Math.random,
      sampleMachine: setting.sampleMachine,
      serverFull$: setting.serverFull$,
      backoff: setting.backoff,
      pullAhead: setting.pullAhead,
      running,
    },
  );
  const { stopOn, off } = onSignals(log, () => {
    pipes.closeAll();
    setting.stop();
    stopping$.next();
  });
  const subscription = merge(
    sinks.toServer$.pipe(tap((m) => toServer$.next(m))),
    sinks.toWorkloads$.pipe(tap((frame) => pipes.write(frame))),
    sinks.metrics$.pipe(tap((event) => metrics?.apply(event))),
  )
    .pipe(
      // A link that does not end within its setting's time after a signal is left.
      takeUntil(setting.stopWithinMs === undefined ? NEVER : stopping$.pipe(delay(setting.stopWithinMs))),
    )
    .subscribe({
      error: (err: unknown) => {
        log.error(err instanceof ServerRefused || err instanceof Ending ? err.message : `The agent failed: ${String(err)}`);
        ended({ code: 1 });
      },
      complete: () => ended({ code: 0 }),
    });
  // A signal the start caught counts as come now, the link running.
  const caught = handOverSignals?.();
  if (caught) stopOn(caught);
  return {
    letGo: () => {
      subscription.unsubscribe();
      pipes.closeAll();
    },
    forgetSignals: off,
  };
}

/** SIGINT and SIGTERM, once; a second signal while stopping changes nothing. Returns what a signal does. */
function onSignals(log: Logger, stop: () => void): { readonly stopOn: (signal: NodeJS.Signals) => void; readonly off: () => void } {
  let stopping = false;
  const stopOn = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: stopping.`);
    stop();
  };
  for (const signal of SIGNALS) process.on(signal, stopOn);
  return { stopOn, off: () => SIGNALS.forEach((signal) => process.off(signal, stopOn)) };
}

/** Connected to an Ankaios server over gRPC; its start (config, security, run folder, the call with its hello) is `early`'s. */
function connected({ config, security, ioFolder }: EarlyStart, log: Logger): Setting {
  const { name, serverUrl, tags } = config;
  const stop$ = new Subject<void>();
  // Fed by the gRPC driver's flow control: while the connection cannot take more, no workload is read.
  const serverFull$ = new BehaviorSubject(false);
  const connect: Connect = (wire$, line) => connectAgent({ serverUrl, security, line, onBackpressure: (full) => serverFull$.next(full) }, wire$);
  return {
    name,
    ioFolder,
    ...workloadSettings(config),
    sampleMachine,
    serverFull$,
    link: (toServer$) => serverLink(connect, toServer$, { agentName: name, log, stop$, tags }),
    // The stream is cancelled, so the server marks the agent gone; the workloads keep running and are
    // resumed at the next start.
    stop: () => stop$.next(),
    stopWithinMs: 3000,
  };
}

/** What both modes take alike from the config: the runtimes, the back-off, the pull ahead, the metrics. */
const workloadSettings = (c: RunConfig): Pick<Setting, 'runtimes' | 'backoff' | 'pullAhead' | 'metrics'> => ({
  runtimes: {
    wanted: c.runtimes,
    health: c.healthChecks,
    settings: c.moduleSettings,
    imageGc: c.imageGc,
  },
  backoff: c.crashLoopBackoff,
  pullAhead: c.pullAhead,
  metrics: c.metrics,
});

/** The runtimes the config enables (all by default); names it does not know are warned about. */
function enabledRuntimes(log: Logger, { wanted, ...settings }: Setting['runtimes'], wiring: RuntimeWiring): MadeRuntimes {
  const all = makeRuntimes(log, { ...settings, ...wiring });
  let selected: ReturnType<typeof selectRuntimes>;
  try {
    selected = selectRuntimes([...all.connectors.keys()], wanted);
  } catch (err) {
    // Refused: what the runtimes began for the run (the Podman service) goes with the agent.
    all.dispose();
    throw err;
  }
  for (const name of selected.unknown) log.warn(`The config names the runtime '${name}', which this agent does not have: ignored.`);
  return { ...all, connectors: new Map(selected.enabled.map((name) => [name, all.connectors.get(name)!])) };
}

/** Without a server: the local server runs the manifest, and a workload may speak either protocol line to it. */
function standalone(flags: CommandLine, manifestFile: string, log: Logger): Setting {
  const initial = readManifest(manifestFile, log);
  if (flags.input.length > 0) throw new ConfigError(`Unexpected argument '${flags.input[0]}'.`, true);
  const config = resolveStandaloneConfig(
    flags,
    process.env,
    readConfigFile(flags.agentConfig, (warning) => log.warn(warning)),
    () => agentOf(initial.desired),
    RUNTIME_SETTINGS,
  );
  const { name, runFolder } = config;
  const ioFolder = prepareRunFolder(runFolder, name, runFolder === defaultRunFolder(process.env));
  const stop$ = new Subject<void>();
  const view = statusView(name, process.stdout, log);
  // Fed by the local server as its state changes: --delete-on-exit ends the run when it holds no workload.
  const snapshots$ = new ReplaySubject<LocalSnapshot>(1);
  const empty: DesiredState = { apiVersion: initial.desired.apiVersion, workloads: new Map(), configs: {} };
  // --delete-on-exit: on stop, an empty manifest deletes every workload before the agent ends.
  const manifests$ = flags.deleteOnExit
    ? concat(watchManifest(manifestFile, initial, log).pipe(takeUntil(stop$)), of(empty))
    : watchManifest(manifestFile, initial, log);
  log.info(`Agent '${name}' running the manifest '${manifestFile}' without a server.`);
  return {
    name,
    ioFolder,
    ...workloadSettings(config),
    link: (toServer$) =>
      localServer(manifests$, toServer$, {
        agentName: name,
        log,
        onSnapshot: (s) => {
          view(s);
          snapshots$.next(s);
        },
      }).pipe(startWith<FromServer>({ kind: 'connected', lines: PROTOCOL_LINES }), takeUntil(flags.deleteOnExit ? emptied(stop$, snapshots$) : stop$)),
    stop: () => {
      if (flags.deleteOnExit) log.info('Deleting the workloads before stopping (--delete-on-exit).');
      stop$.next();
    },
  };
}

/** After a stop, the first moment the local server holds no workload; an error after 60 s without one. */
function emptied(stop$: Observable<void>, snapshots$: Observable<LocalSnapshot>): Observable<LocalSnapshot> {
  return stop$.pipe(
    switchMap(() =>
      snapshots$.pipe(
        first((s) => s.states.size === 0),
        timeout({ first: 60_000, with: () => throwError(() => new Ending('Not every workload was deleted within 60 s.')) }),
      ),
    ),
  );
}

/** The agent a manifest is for, when -n does not say: the one agent its workloads name. */
function agentOf(desired: DesiredState): string {
  const agents = new Set([...desired.workloads.values()].map((w) => w.spec.instanceName.agentName).filter((a) => a !== ''));
  if (agents.size === 1) return [...agents][0];
  if (agents.size === 0) return 'standalone';
  throw new ConfigError(`The manifest names the agents ${[...agents].sort().join(', ')}: say which one this is with -n.`);
}
