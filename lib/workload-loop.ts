// The words of a workload's control loop (streams/control-workload.ts runs it): the commands it takes, what it
// knows of its workload, the steps it emits, and the create back-off. Pure: types and small constructors.
import type { ExecutionState } from './execution-state.js';
import type { WorkloadState } from './messages.js';
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

/** What a loop says to itself. */
export type SelfCommand =
  /** The next create attempt is due. */
  | { readonly kind: 'retry' }
  /** The workload ended (as `exit` says) and its restart policy restarts it; `succeeded`: it ended well (it may be started again in place). */
  | { readonly kind: 'exited'; readonly succeeded: boolean; readonly exit: ExecutionState }
  /** The crash-loop back-off is over: restart now. */
  | { readonly kind: 'restart' }
  /** The new image of an update is on the node: the old instance can go. */
  | { readonly kind: 'fetched' };

/** Commands after which the loop ends. */
export const endsLoop = (c: WorkloadCommand): boolean => c.kind === 'delete' || (c.kind === 'removeExisting' && c.final);

/** swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1: the first wait before a retry, doubled each time. */
export const RETRY_BASE_MS = 500;
/** The longest wait before a retry of a create. */
export const MAX_RETRY_BACKOFF_MS = 5 * 60_000;

/** The wait before retry number `done + 1` of a create: a random share (full jitter) of the exponential backoff. */
export const createBackoffMs = (done: number, jitter: number): number =>
  Math.round(jitter * Math.min(RETRY_BASE_MS * 2 ** Math.min(done, 30), MAX_RETRY_BACKOFF_MS));

/** What one control loop knows of its workload; it changes only by the `become` steps the loop emits. */
export type LoopState =
  /** Nothing managed: before the first command, and after a removal. */
  | { readonly kind: 'idle' }
  /** A workload of an earlier run that exited well, kept for the next create to start again in place (not watched). */
  | { readonly kind: 'adopted'; readonly existing: ExistingWorkload }
  /** Managed, with nothing known on the runtime: being created, refused, or not found to resume. */
  | { readonly kind: 'absent'; readonly spec: WorkloadSpec }
  /**
   * Created or resumed under `id` on `runtime`: its state is watched. `startedAt`: when it last started;
   * `shortRuns`: how many runs in a row before this one were too short (the crash-loop back-off counts them).
   */
  | (Running & { readonly kind: 'created' })
  /** It exited and its restart policy restarts it after `delayMs` of crash-loop back-off; nothing is watched meanwhile. */
  | (Running & { readonly kind: 'backingOff'; readonly succeeded: boolean; readonly delayMs: number })
  /** It runs (and is watched) while the image of `next`, its update, is pulled. */
  | (Running & { readonly kind: 'fetching'; readonly next: WorkloadSpec })
  /** Create attempt `retries + 1` failed: the next one is due after a backoff. */
  | { readonly kind: 'retrying'; readonly spec: WorkloadSpec; readonly retries: number; readonly shortRuns: number }
  /** Its removal failed: nothing is watched until the next command, which may try again. */
  | { readonly kind: 'deleteFailed'; readonly spec: WorkloadSpec; readonly id: unknown };

/** A workload the loop has on its runtime. */
export interface Running {
  readonly spec: WorkloadSpec;
  readonly runtime: RuntimeConnector;
  readonly id: unknown;
  readonly startedAt: number;
  readonly shortRuns: number;
}

/** A step of the loop: a state to report, its next state, a command to itself, or its end. */
export type Step =
  | { readonly kind: 'report'; readonly state: WorkloadState }
  | { readonly kind: 'become'; readonly state: LoopState }
  | { readonly kind: 'self'; readonly command: SelfCommand }
  | { readonly kind: 'end' };
export const END: Step = { kind: 'end' };
export const IDLE: LoopState = { kind: 'idle' };

export const become = (state: LoopState): Step => ({ kind: 'become', state });
export const self = (command: SelfCommand): Step => ({ kind: 'self', command });
export const report = (instanceName: WorkloadInstanceName, executionState: ExecutionState): Step => ({
  kind: 'report',
  state: { instanceName, executionState },
});
