// A runtime module: what a runtime's folder exports (lib/runtimes/<name>/index.ts) and what the agent gives it to
// make its runtimes. bin/wiring.ts lists the modules; nothing else names a runtime.
import type { Observable, SchedulerLike, Subscription } from 'rxjs';
import type { Logger } from '../../logger.js';
import type { WorkloadContainerFigures } from '../../metrics.js';
import type { Notes } from '../../ports.js';
import type { RuntimeConnector } from '../../runtime-connector.js';
import type { RunningWorkloads } from '../../running-workloads.js';
import type { Cli, CliOptions } from './cli.js';
import type { Declared, ImageGcSettings } from '../../config.js';

export interface RuntimeModule<S = unknown> {
  /** The runtimes it makes, as workloads name them; the first names the module (its settings go by it). */
  readonly names: readonly string[];
  /** What it reads of the agent config file and the environment (its folder's settings.ts), if anything. */
  readonly settings?: Declared<S>;
  /** Its runtimes, with its own settings (as `settings` made them of the config; of none given, without one). */
  make(context: RuntimeContext, settings: S): Runtimes;
}

/** What the agent gives a module. */
export interface RuntimeContext {
  readonly log: Logger;
  /** A runner of the CLI `binary` on the run's processes, its calls told to --debug and the metrics. */
  readonly cli: (binary: string, options?: Omit<CliOptions, 'binary' | 'processes' | 'clock' | 'log' | 'observe'>) => Cli;
  /** The agent config's settings for runtimes. */
  readonly config: RuntimeSettings;
  /** --debug: whether a stage is traced, and `text` told under it. */
  readonly trace: Notes;
  /** The run's clock and timers. */
  readonly scheduler: SchedulerLike;
  /** What a runtime keeps going for the whole run (a timer): the run lets it go when it ends. */
  readonly held: Subscription;
  /** The metrics: an engine's event stream started again within one run of its cache. */
  readonly eventsRestarted?: (engine: string) => void;
  /** The metrics: an image removed by the collector, or how full an engine's image store is. */
  readonly images?: (engine: string, change: { readonly removed?: number; readonly usedRatio?: number }) => void;
}

export interface RuntimeSettings {
  /** The agent runs the health checks the workloads ask for (`health_checks`; false: they are the engine's). */
  readonly health: boolean;
  /** Whether states follow the engines' own news (false: polls only, the specs' and benchmarks' comparison). */
  readonly events: boolean;
  /** How often a container cache kept by events verifies them by a poll (ms). */
  readonly verifyMs?: number;
  /** The agent's own folder (its io folder), where a runtime may keep what it runs (a service's socket). */
  readonly folder?: string;
  /** When the agent collects the images it pulled (agent config `image_gc`); undefined: never. */
  readonly imageGc?: ImageGcSettings;
}

/** A module's runtimes, and what the metrics ask of them. */
export interface Runtimes {
  readonly connectors: ReadonlyMap<string, RuntimeConnector>;
  /** The figures of the containers of this agent's workloads, each with its workload (asked at a scrape). */
  readonly figures?: (agentName: string, running: RunningWorkloads) => Observable<WorkloadContainerFigures[]>;
}
