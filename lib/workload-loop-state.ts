// What a workload's control loop knows and takes (lib/workload-loop.ts is its step): the commands, the loop's
// states, the outcomes and effects, what a settled state follows, and the create back-off. Types and constants
// only, and plain data: a runtime by its name (the spec's), an image by its reference; nothing runs here.
import type { ExecutionState } from './execution-state.js';
import type { WorkloadState } from './messages.js';
import type { CrashLoopBackoff } from './restart-policy.js';
import type { ExistingWorkload, RuntimeConnector } from './runtime-connector.js';
import type { WorkloadInstanceName, WorkloadSpec } from './workload.js';

export type WorkloadCommand =
  | { readonly kind: 'create'; readonly spec: WorkloadSpec }
  | { readonly kind: 'resume'; readonly spec: WorkloadSpec }
  /** Delete the current workload, then create `spec`; without `spec` only delete (update delete only). */
  | { readonly kind: 'update'; readonly spec?: WorkloadSpec }
  | { readonly kind: 'delete'; readonly instanceName: WorkloadInstanceName }
  /** Delete a workload found from an earlier run of the agent; `final` when nothing follows it. */
  | { readonly kind: 'removeExisting'; readonly existing: ExistingWorkload; readonly final: boolean }
  /** Keep a workload of an earlier run that exited well, for the next create to start again in place. */
  | { readonly kind: 'adopt'; readonly existing: ExistingWorkload };

/** Commands after which the loop ends. */
export const endsLoop = (c: WorkloadCommand): boolean => c.kind === 'delete' || (c.kind === 'removeExisting' && c.final);

/** swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1: the first wait before a retry, doubled each time. */
export const RETRY_BASE_MS = 500;
/** The longest wait before a retry of a create. */
export const MAX_RETRY_BACKOFF_MS = 5 * 60_000;

/** The wait before retry number `done + 1` of a create: a random share (full jitter) of the exponential backoff. */
export const createBackoffMs = (done: number, jitter: number): number =>
  Math.round(jitter * Math.min(RETRY_BASE_MS * 2 ** Math.min(done, 30), MAX_RETRY_BACKOFF_MS));

/** A workload the loop has on its runtime (the spec's). */
export interface Running {
  readonly spec: WorkloadSpec;
  readonly id: unknown;
  /** When it last started (ms). */
  readonly startedAt: number;
  /** How many runs in a row before this one were too short (the crash-loop back-off counts them). */
  readonly shortRuns: number;
}

/** What the loop does once a removal is over: end, create anew, or go back to where it was. */
export type Afterwards =
  | { readonly kind: 'end' }
  | { readonly kind: 'attempt'; readonly spec: WorkloadSpec; readonly shortRuns: number }
  | { readonly kind: 'back'; readonly to: LoopState };

/** What one control loop knows of its workload. The settled states wait for a command (and follow their workload); the busy ones for their effect's outcome. */
export type LoopState =
  /** Nothing managed: before the first command, and after a removal. */
  | { readonly kind: 'idle' }
  /** A workload of an earlier run that exited well, kept for the next create to start again in place (not watched). */
  | { readonly kind: 'adopted'; readonly existing: ExistingWorkload }
  /** Managed, with nothing known on the runtime: refused, or not found to resume. */
  | { readonly kind: 'absent'; readonly spec: WorkloadSpec }
  /** Created or resumed: its state is watched. */
  | (Running & { readonly kind: 'created' })
  /** It exited and its restart policy restarts it after `delayMs` of crash-loop back-off; nothing is watched meanwhile. */
  | (Running & { readonly kind: 'backingOff'; readonly succeeded: boolean; readonly delayMs: number })
  /**
   * It runs (and is watched) while the `images` of `next`, its update, are fetched; after `tries` failed pulls
   * it waits `retryInMs` before the next.
   */
  | (Running & {
      readonly kind: 'fetching';
      readonly next: WorkloadSpec;
      readonly images: readonly string[];
      readonly tries: number;
      readonly retryInMs?: number;
    })
  /** Create attempt `retries + 1` failed: the next one is due after `delayMs`. */
  | { readonly kind: 'retrying'; readonly spec: WorkloadSpec; readonly retries: number; readonly shortRuns: number; readonly delayMs: number }
  /** Its removal failed: nothing is watched until the next command, which may try again. */
  | { readonly kind: 'deleteFailed'; readonly spec: WorkloadSpec; readonly id: unknown }
  /** Busy: create attempt `retries + 1` under way. */
  | { readonly kind: 'creating'; readonly spec: WorkloadSpec; readonly retries: number; readonly shortRuns: number }
  /** Busy: the container `id` is started again in place; `instead` is what a failure leads to. */
  | {
      readonly kind: 'startingAgain';
      readonly spec: WorkloadSpec;
      readonly id: unknown;
      readonly shortRuns: number;
      readonly instead: { readonly kind: 'removeExisting'; readonly existing: ExistingWorkload } | { readonly kind: 'replace'; readonly current: Running };
      /** The workload still on the runtime meanwhile (a restart in place), if any. */
      readonly running?: Running;
    }
  /** Busy: its workload is removed (by `id`, or by name when none is known), then `afterwards`. */
  | { readonly kind: 'removing'; readonly spec: WorkloadSpec; readonly id: unknown; readonly afterwards: Afterwards; readonly running?: Running }
  /** Busy: a workload of an earlier run is removed, then `afterwards`. */
  | { readonly kind: 'removingExisting'; readonly existing: ExistingWorkload; readonly afterwards: Afterwards }
  /** Busy: the workload to resume is looked for (look `tries + 1`). */
  | { readonly kind: 'finding'; readonly spec: WorkloadSpec; readonly tries: number }
  /** Look `tries` for the workload to resume failed (the runtime could not say): the next is due after `delayMs`. */
  | { readonly kind: 'refinding'; readonly spec: WorkloadSpec; readonly tries: number; readonly delayMs: number };

export const IDLE: LoopState = { kind: 'idle' };

const BUSY = new Set<LoopState['kind']>(['creating', 'startingAgain', 'removing', 'removingExisting', 'finding']);
/** Whether the loop waits for an effect's outcome (commands wait meanwhile). */
export const isBusy = (state: LoopState): boolean => BUSY.has(state.kind);

/** What the loop takes in: a command, or how an effect came out. */
export type LoopInput =
  | { readonly kind: 'command'; readonly command: WorkloadCommand }
  | { readonly kind: 'created'; readonly id: unknown }
  /** `refused`: the runtime (or its config) refuses the workload: no retry. */
  | { readonly kind: 'createFailed'; readonly cause: string; readonly refused: boolean }
  | { readonly kind: 'startedAgain' }
  | { readonly kind: 'startAgainFailed' }
  /** The removal is over: `failure` says why it failed, if it did. */
  | { readonly kind: 'removed'; readonly failure?: string }
  | { readonly kind: 'existingRemoved'; readonly failure?: string }
  /** The workload to resume was looked for: its id, none when it is not there, or why the runtime could not say. */
  | { readonly kind: 'found'; readonly id?: unknown; readonly failure?: string }
  /** The runtime's state of the watched workload. */
  | { readonly kind: 'seen'; readonly state: ExecutionState }
  /** An unhealthy workload's container was stopped (its restart policy acts only then). */
  | { readonly kind: 'stoppedUnhealthy'; readonly state: ExecutionState }
  | { readonly kind: 'watchFailed' }
  /** The wait of a retrying, backing-off or fetching loop is over. */
  | { readonly kind: 'waited' }
  | { readonly kind: 'pullNote'; readonly note: string }
  | { readonly kind: 'pulled' }
  | { readonly kind: 'pullFailed'; readonly cause: string };

/**
 * What the interpreter runs, each on the spec's runtime (the step has found it there). Work (the busy states')
 * ends with one outcome; a follow lasts until the state leaves it.
 */
export type Effect =
  | { readonly kind: 'create'; readonly spec: WorkloadSpec }
  | { readonly kind: 'startAgain'; readonly spec: WorkloadSpec; readonly id: unknown; readonly prepare: boolean }
  /** The workload deleted by its id, then its host side released. */
  | { readonly kind: 'remove'; readonly spec: WorkloadSpec; readonly id: unknown }
  /** What may run under the name deleted (none is known: a create cut short), as far as it goes, then the host side released. */
  | { readonly kind: 'removeByName'; readonly spec: WorkloadSpec }
  | { readonly kind: 'removeExisting'; readonly existing: ExistingWorkload }
  | { readonly kind: 'find'; readonly spec: WorkloadSpec }
  /** An unhealthy workload's container stopped (and kept): `stoppedUnhealthy` with its `state` once it is, whatever the stop's outcome. */
  | { readonly kind: 'stop'; readonly spec: WorkloadSpec; readonly id: unknown; readonly state: ExecutionState }
  | { readonly kind: 'warn'; readonly text: string };

/** What a settled state follows until the next command, each by a key: a follow whose key stays keeps running. */
export type Follow =
  | { readonly kind: 'watch'; readonly key: string; readonly running: Running }
  | { readonly kind: 'wait'; readonly key: string; readonly ms: number }
  | { readonly kind: 'pull'; readonly key: string; readonly spec: WorkloadSpec; readonly images: readonly string[] };

export interface LoopContext {
  readonly runtimes: ReadonlyMap<string, RuntimeConnector>;
  readonly backoff: CrashLoopBackoff;
  /** An update first has its new image on the node while the old instance runs. */
  readonly pullAhead: boolean;
}

/** When an input came (ms), and a random fraction in [0, 1] for a retry's jitter. */
export interface Moment {
  readonly at: number;
  readonly jitter: number;
}

export interface Transition {
  readonly state: LoopState;
  readonly reports: readonly WorkloadState[];
  readonly effects: readonly Effect[];
  readonly end: boolean;
}
