// How the runtimes are put together: each runtime module of the list is given the run's processes, its CLIs,
// a container cache for its engine and the agent config's settings; used by the agent and by the specs and
// benchmarks that run it on real parts.
import { type Observable, type SchedulerLike, Subscription, asyncScheduler, forkJoin, map, of } from 'rxjs';
import type { Processes } from '../lib/drivers/processes.js';
import type { Logger } from '../lib/logger.js';
import type { CliCall, WorkloadContainerFigures } from '../lib/metrics.js';
import type { RuntimeConnector } from '../lib/runtime-connector.js';
import type { RunningWorkloads } from '../lib/running-workloads.js';
import { Cli } from '../lib/runtimes/base/cli.js';
import type { ImageGcSettings } from '../lib/config.js';
import type { RuntimeContext, RuntimeModule } from '../lib/runtimes/base/module.js';
import { containerdModule } from '../lib/runtimes/containerd/index.js';
import { podmanModule } from '../lib/runtimes/podman/index.js';
import { systemdModule } from '../lib/runtimes/systemd/index.js';
import { type Trace, noTrace } from '../streams/trace.js';

/** The runtimes this agent has: a module each. */
export const RUNTIME_MODULES: readonly RuntimeModule[] = [podmanModule(), containerdModule, systemdModule];

export interface RuntimeWiring {
  /** The run's clock and timers (the async scheduler unless given). */
  readonly scheduler?: SchedulerLike;
  /** The modules to make (all of the list unless given). */
  readonly modules?: readonly RuntimeModule[];
  /** What runs the runtimes' processes: the run's. */
  readonly processes: Processes;
  /** CLIs by binary name that the modules are to use (the specs' wrappers); others are made on `processes`. */
  readonly clis?: Readonly<Record<string, Cli>>;
  /** Whether the caches follow their engines' events (false: polls only). */
  readonly events?: boolean;
  readonly verifyMs?: number;
  /** The agent runs the workloads' health checks (agent config `health_checks`). */
  readonly health?: boolean;
  /** Each module's settings, by module (its first runtime's name); a module not given one has its settings of an empty config. */
  readonly settings?: ReadonlyMap<string, unknown>;
  /** The agent's io folder: Podman's service gets its socket there (without one, only the system's service is used). */
  readonly folder?: string;
  /** When the images the agent pulled are collected (agent config `image_gc`; none unless given). */
  readonly imageGc?: ImageGcSettings;
  /** --debug: the caches' stages (`podman.cache`) and each CLI's calls (stage: its name). */
  readonly trace?: Trace;
  /** The metrics: each CLI call, and each restart of an engine's event stream. */
  readonly observeCall?: (call: CliCall) => void;
  readonly eventsRestarted?: (engine: string) => void;
  /** The metrics: the image collector's removals and how full the image stores are. */
  readonly images?: (engine: string, change: { readonly removed?: number; readonly usedRatio?: number }) => void;
}

/** What the agent runs workloads with: the runtimes by name, and their containers' figures for the metrics. */
export interface MadeRuntimes {
  readonly connectors: ReadonlyMap<string, RuntimeConnector>;
  readonly figures: (agentName: string, running: RunningWorkloads) => Observable<WorkloadContainerFigures[]>;
  /** Lets go of what the runtimes keep going for the run (their timers). */
  readonly dispose: () => void;
}

export function makeRuntimes(log: Logger, wiring: RuntimeWiring): MadeRuntimes {
  const { events = true, verifyMs, trace = noTrace } = wiring;
  const held = new Subscription();
  const scheduler = wiring.scheduler ?? asyncScheduler;
  const context: RuntimeContext = {
    log,
    scheduler,
    held,
    cli: (binary, options) =>
      wiring.clis?.[binary] ??
      new Cli({
        ...options,
        binary,
        log,
        processes: wiring.processes,
        clock: scheduler,
        observe: (call) => {
          wiring.observeCall?.({ cli: binary, ...call });
          if (trace.enabled(binary))
            trace.note(binary, `${call.args.join(' ')}: ${call.outcome} in ${call.seconds.toFixed(3)} s${call.via ? ` via ${call.via}` : ''}`);
        },
      }),
    config: {
      health: wiring.health ?? true,
      events,
      verifyMs,
      folder: wiring.folder,
      imageGc: wiring.imageGc,
    },
    trace,
    eventsRestarted: wiring.eventsRestarted,
    images: wiring.images,
  };
  const made = (wiring.modules ?? RUNTIME_MODULES).map((module) =>
    module.make(context, wiring.settings?.get(module.names[0]) ?? module.settings?.parse({}, {})),
  );
  return {
    connectors: new Map(made.flatMap((m) => [...m.connectors])),
    figures: (agentName, running) => {
      const all = made.flatMap((m) => (m.figures ? [m.figures(agentName, running)] : []));
      return all.length === 0 ? of([]) : forkJoin(all).pipe(map((lists) => lists.flat()));
    },
    dispose: () => held.unsubscribe(),
  };
}

/** The runtimes by name (the specs' and benchmarks' way in). */
export const builtInRuntimes = (log: Logger, wiring: RuntimeWiring): ReadonlyMap<string, RuntimeConnector> => makeRuntimes(log, wiring).connectors;
