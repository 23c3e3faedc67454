// The ports between the pure core and the drivers: what a driver provides, typed here so that
// neither side imports the other.
import type { Observable } from 'rxjs';
import type { ExecutionState } from './execution-state.js';
import type { ControlInterfaceAccess } from './workload.js';

/** A container as the cache keeps it, in words no engine owns (each runtime reads its CLI's rows into it). */
export interface Container {
  readonly id: string;
  readonly names?: readonly string[];
  /** The engine's state word (`created`, `running`, `stopped`, `exited`, `paused`, …). */
  readonly state?: string;
  readonly exitCode?: number;
  readonly labels?: Readonly<Record<string, string>> | null;
  /** The pod it is in (Podman's). */
  readonly pod?: string;
  /** Whether it is its pod's infra container. */
  readonly isInfra?: boolean;
  /** The image it was made of, as its create named it, and the image's id where the engine tells it. */
  readonly image?: string;
  readonly imageId?: string;
}

/** One look at all containers of the runtime. */
export interface Snapshot {
  /** The poll the snapshot rests on (events may have changed it since): it is younger than every poll with a lower number. */
  readonly poll: number;
  /** The containers by id, the cache's own picture (never changed once given); undefined when the engine could not be asked: `error` then says why. */
  readonly containers?: ReadonlyMap<string, Container>;
  readonly error?: string;
  /** When the change it shows was heard (ms, wall clock): the event's own time, or when the poll answered. */
  readonly heardAt?: number;
  /** The container an event changed, when the event stream was up: news of it as current as a poll's. */
  readonly news?: string;
  /**
   * The containers it shows otherwise than the snapshot before it (added, changed or gone); undefined when that is
   * not known (the first, one after a failure): a watcher of other containers need not read it.
   */
  readonly changed?: ReadonlySet<string>;
}

/**
 * What changed of a container, in words no engine owns (each runtime translates its engine's): made, set up,
 * started, its process ended, removed, paused, resumed; `exit-file-taken`: the engine took in an exit that was
 * told before it (conmon's exit file, gone).
 */
export type ContainerChange = 'created' | 'initialized' | 'started' | 'exited' | 'removed' | 'paused' | 'resumed' | 'exit-file-taken';

/** What an engine's events (or what tells before them) say of a container. */
export interface ContainerEvent {
  readonly id: string;
  readonly change: ContainerChange;
  /** With `exited`: how the container's process ended. */
  readonly exitCode?: number;
  /** When it happened (ms, wall clock), as the engine tells it. */
  readonly at?: number;
  /** What the events tell of the container besides (its name, labels and pod): enough to show one the picture does not have yet. */
  readonly container?: Pick<Container, 'names' | 'labels' | 'pod'>;
  /**
   * With `started`: a start the agent ran itself (its `podman start` or `podman run` returned; `at`: when it was asked): a new run,
   * unless an exit was told after it was asked (that run ended before the start returned).
   */
  readonly own?: boolean;
}

/** Whose containers a cache follows: the engine's name as messages say it (`Podman`), and the --debug stage of its cache (`podman.cache`). */
export interface Engine {
  readonly name: string;
  readonly stage: string;
}

export interface ContainerCache {
  /**
   * swdd~podmancli-uses-container-state-cache~1: snapshots taken after the subscription, refreshed while watched;
   * with `ids`, also those an event of one of these containers made after the subscription (the stream up), and
   * of the events' snapshots only those of these containers (a poll's is given to every watcher). `made`: the
   * start of the container a create of the agent's just made, told to the cache once the watcher is on, so that
   * the watcher hears it as news (the stream up) instead of asking for a poll.
   */
  fresh(ids?: readonly string[], made?: ContainerEvent): Observable<Snapshot>;
}

/** --debug as the runtimes see it: whether a stage is traced (what to say need not be built), and a step said in words. */
export interface Notes {
  readonly enabled: (stage: string) => boolean;
  readonly note: (stage: string, text: string) => void;
}

/** What a runtime's state getter reads out of a snapshot for one workload. */
export interface StateReading {
  readonly state: ExecutionState;
  /** A state the runtime passes through on the way to another (Podman's `stopped` while a container exits): reported only when it lasts. */
  readonly transient: boolean;
}

/**
 * The generic state checker: the workload's execution state, each time it changes, as `read` finds it in the
 * snapshots; `ids`, the containers it reads, when they are known: their own events then answer before a poll;
 * `made`, the start of the container a create just made (ContainerCache's `fresh`).
 */
export type WatchState = (
  read: (containers: ReadonlyMap<string, Container>) => StateReading,
  ids?: readonly string[],
  made?: ContainerEvent,
) => Observable<ExecutionState>;

/** A container's figures, as a runtime's stats give them (the metrics' container families). */
export interface ContainerFigures {
  /** The container's name. */
  readonly Name: string;
  readonly CPU: number;
  readonly MemUsage: number;
  readonly MemLimit: number;
  readonly NetInput: number;
  readonly NetOutput: number;
  readonly BlockInput: number;
  readonly BlockOutput: number;
  readonly PIDs: number;
}

/** Cumulative CPU time (busy and total, in ticks) and free memory, as the machine reports them. */
export interface MachineSample {
  readonly cpuBusy: number;
  readonly cpuTotal: number;
  readonly freeMemory: number;
}

/** A workload's Control Interface, opened: what the workload writes into its output pipe, until it is closed. */
export interface ControlInterfacePipe {
  readonly workloadName: string;
  readonly access: ControlInterfaceAccess;
  readonly chunks$: Observable<Uint8Array>;
}

/** A frame the agent writes into a workload's input pipe. */
export interface WorkloadFrame {
  readonly workloadName: string;
  readonly bytes: Uint8Array;
  /** With log entries: the (prefixed) id of the log request they answer, cancelled if they cannot be delivered. */
  readonly logStream?: string;
}

/** A frame of a workload's Control Interface output, as the framing reads it (streams/length-delimited.ts). */
export type Frame =
  | { readonly kind: 'frame'; readonly bytes: Uint8Array }
  /** Bytes that cannot be a frame; what was buffered is dropped and reading starts afresh with the next chunk. */
  | { readonly kind: 'garbage'; readonly reason: string }
  /** A frame larger than the agent takes: its bytes are passed over as they come (never held), framing goes on after it. */
  | { readonly kind: 'oversized'; readonly size: number };

/** Far above any real Control Interface message; a larger frame is passed over. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;
