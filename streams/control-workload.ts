// The WorkloadControlLoop: executes the commands for one workload strictly in order and watches
// the workload's state in between, restarting it by its restart policy and retrying failed creates.
import {
  EMPTY,
  type Observable,
  Subject,
  catchError,
  concat,
  concatMap,
  defer,
  endWith,
  filter,
  ignoreElements,
  map,
  merge,
  mergeMap,
  of,
  takeWhile,
  tap,
  timer,
} from 'rxjs';
import { ExecutionState } from '../lib/execution-state.js';
import type { WorkloadState } from '../lib/messages.js';
import { needsRestart } from '../lib/restart-policy.js';
import type { RunningWorkloads } from '../lib/running-workloads.js';
import { ConfigurationError, type CreateOptions, type ExistingWorkload, type RuntimeConnector } from '../lib/runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, sameInstance } from '../lib/workload.js';
import { runThenFollow } from './run-then-follow.js';

export type WorkloadCommand =
  | { readonly kind: 'create'; readonly spec: WorkloadSpec }
  | { readonly kind: 'resume'; readonly spec: WorkloadSpec }
  /** Delete the current workload, then create `spec`; without `spec` only delete (update delete only). */
  | { readonly kind: 'update'; readonly spec?: WorkloadSpec }
  | { readonly kind: 'delete'; readonly instanceName: WorkloadInstanceName }
  /** Delete a workload found from an earlier run of the agent; `final` when nothing follows it. */
  | { readonly kind: 'removeExisting'; readonly existing: ExistingWorkload; readonly final: boolean }
  /** Keep a workload of an earlier run that exited well, for the next create to start again in place. */
  | { readonly kind: 'adopt'; readonly existing: ExistingWorkload }
  /** Sent by the loop to itself; `succeeded`: the workload ended well (it may then be started again in place). */
  | { readonly kind: 'retry' }
  | { readonly kind: 'restart'; readonly succeeded: boolean };

/** Commands after which the loop ends. */
export const endsLoop = (c: WorkloadCommand): boolean => c.kind === 'delete' || (c.kind === 'removeExisting' && c.final);

/** swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1: the first wait before a retry, doubled each time. */
export const RETRY_BASE_MS = 500;
/** The longest wait before a retry of a create. */
export const MAX_RETRY_BACKOFF_MS = 5 * 60_000;

/** The wait before retry number `done + 1` of a create: a random share (full jitter) of the exponential backoff. */
export const createBackoffMs = (done: number, jitter: number): number =>
  Math.round(jitter * Math.min(RETRY_BASE_MS * 2 ** Math.min(done, 30), MAX_RETRY_BACKOFF_MS));

export interface ControlDeps {
  readonly runtimes: ReadonlyMap<string, RuntimeConnector>;
  /** Prepares the host side of a workload (Control Interface, files) before it is created. */
  readonly prepare: (spec: WorkloadSpec) => Observable<CreateOptions>;
  /** Undoes `prepare` once the workload is gone. */
  readonly release: (spec: WorkloadSpec) => Observable<never>;
  /** A random fraction in [0, 1] for the jitter of create retries (the full backoff when not given). */
  readonly jitter?: () => number;
  /** Kept up to date with the workloads the loops have created (the log requests are resolved against it). */
  readonly running?: RunningWorkloads;
}

type Output = WorkloadState | { readonly command: WorkloadCommand };

/** What one control loop knows of its workload; it changes only by the `become` steps the loop emits. */
export type LoopState =
  /** Nothing managed: before the first command, and after a removal. */
  | { readonly kind: 'idle' }
  /** A workload of an earlier run that exited well, kept for the next create to start again in place (not watched). */
  | { readonly kind: 'adopted'; readonly existing: ExistingWorkload }
  /** Managed, with nothing known on the runtime: being created, refused, or not found to resume. */
  | { readonly kind: 'absent'; readonly spec: WorkloadSpec }
  /** Created or resumed under `id`: its state is watched. */
  | { readonly kind: 'created'; readonly spec: WorkloadSpec; readonly id: unknown }
  /** Create attempt `retries + 1` failed: the next one is due after a backoff. */
  | { readonly kind: 'retrying'; readonly spec: WorkloadSpec; readonly retries: number }
  /** Its removal failed: nothing is watched until the next command, which may try again. */
  | { readonly kind: 'deleteFailed'; readonly spec: WorkloadSpec; readonly id: unknown };

/** A step of the loop: a state to report, a command to itself, its next state, or its end. */
type Step = Output | { readonly become: LoopState } | typeof END;
const END = Symbol('end of loop');
const IDLE: LoopState = { kind: 'idle' };

const become = (state: LoopState): Step => ({ become: state });
const report = (instanceName: WorkloadInstanceName, executionState: ExecutionState): WorkloadState => ({ instanceName, executionState });
const causeOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));
/** What an action that emits nothing came to: `undefined` when it completed, else why it failed. */
const failureOf = (action$: Observable<unknown>): Observable<string | undefined> =>
  action$.pipe(
    ignoreElements(),
    endWith(undefined),
    catchError((err: unknown) => of(causeOf(err))),
  );
/** swdd~agent-skips-unknown-runtime~2: a runtime the agent does not have (or has not enabled), in the released agent's words. */
const unknownRuntime = (spec: WorkloadSpec) => report(spec.instanceName, ExecutionState.startingFailed('Unsupported Runtime'));
const starting = (spec: WorkloadSpec) => of(report(spec.instanceName, ExecutionState.starting('Triggered at runtime.')));

/**
 * swdd~agent-create-workload~2, swdd~agent-resume-workload~2: one loop per workload, fed by `commands$`.
 * Each command runs to its end before the next starts; what follows it (watching the state, waiting
 * for a retry) lasts until the next command arrives. The loop's state changes in one place: here.
 */
export function controlWorkload(commands$: Observable<WorkloadCommand>, deps: ControlDeps): Observable<WorkloadState> {
  return defer(() => {
    const steps = new LoopSteps(deps);
    const internal$ = new Subject<WorkloadCommand>();
    let state: LoopState = IDLE;
    return merge(commands$, internal$).pipe(
      runThenFollow(
        (command) => defer(() => steps.execute(state, command)),
        () => steps.follow(state),
      ),
      takeWhile((step): step is Exclude<Step, typeof END> => step !== END),
      tap((step) => {
        if ('become' in step) {
          noteRunning(deps, state, step.become);
          state = step.become;
        } else if ('command' in step) internal$.next(step.command);
      }),
      filter((step): step is WorkloadState => 'executionState' in step),
    );
  });
}

/** Keeps `deps.running` in step with a loop whose state changes from `from` to `to`. */
function noteRunning({ running, runtimes }: ControlDeps, from: LoopState, to: LoopState): void {
  if (from.kind === 'created') running?.delete(from.spec.instanceName);
  const runtime = to.kind === 'created' ? runtimes.get(to.spec.runtime) : undefined;
  if (to.kind === 'created' && runtime) running?.set(to.spec.instanceName, { runtime, id: to.id });
}

/** The steps a loop can take on its workload, each a function of the loop's state when it starts. */
class LoopSteps {
  constructor(private readonly deps: ControlDeps) {}

  execute(state: LoopState, command: WorkloadCommand): Observable<Step> {
    switch (command.kind) {
      case 'create':
        return this.create(state, command.spec);
      case 'resume':
        return this.resume(command.spec);
      case 'update':
        return this.update(state, command.spec);
      case 'delete':
        return this.delete(state, command.instanceName);
      case 'removeExisting':
        return concat(this.removeExisting(command.existing), command.final ? of(END) : EMPTY);
      case 'adopt':
        return of(become({ kind: 'adopted', existing: command.existing }));
      case 'retry':
        // swdd~agent-workload-control-loop-executes-retry~1: retries have no limit; only another command ends them.
        return state.kind === 'retrying' ? this.attempt(state.spec, state.retries + 1) : EMPTY;
      case 'restart':
        return state.kind === 'created' ? this.restart(state, command.succeeded) : EMPTY;
    }
  }

  /** What runs until the next command: the state watch, or the wait for the next retry. */
  follow(state: LoopState): Observable<Step> {
    if (state.kind === 'created') return this.watch(state);
    if (state.kind !== 'retrying') return EMPTY;
    // swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1,
    // swdd~agent-workload-control-loop-exponential-backoff-retries~1
    const wait = createBackoffMs(state.retries, this.deps.jitter?.() ?? 1);
    return timer(wait).pipe(map(() => ({ command: { kind: 'retry' } as const })));
  }

  /**
   * swdd~agent-workload-control-loop-executes-create~4, swdd~agent-skips-unknown-runtime~1: a kept workload
   * of an earlier run with the same config is started again in place (a new one is created when that
   * fails); one of another config is deleted first.
   */
  private create(state: LoopState, spec: WorkloadSpec): Observable<Step> {
    const reusable = state.kind === 'adopted' ? state.existing : undefined;
    const runtime = this.deps.runtimes.get(spec.runtime);
    if (!reusable) return concat(starting(spec), this.attempt(spec, 0));
    if (!runtime?.startAgain || !sameInstance(reusable.instanceName, spec.instanceName)) {
      return concat(this.removeExisting(reusable), starting(spec), this.attempt(spec, 0));
    }
    const startAgain$ = concat(this.deps.prepare(spec), runtime.startAgain(reusable.id, spec)).pipe(ignoreElements());
    return concat(
      of(become({ kind: 'absent', spec })),
      starting(spec),
      startAgain$.pipe(
        endWith(become({ kind: 'created', spec, id: reusable.id })),
        catchError(() => concat(this.removeExisting(reusable), starting(spec), this.attempt(spec, 0))),
      ),
    );
  }

  /**
   * Create attempt `retries + 1`. swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1,
   * swdd~agent-workload-control-loop-handles-failed-workload-creation~1: a failure is reported
   * Pending(Starting) "Retry <n>: <cause>" and retried; a config the runtime refuses is not.
   */
  private attempt(spec: WorkloadSpec, retries: number): Observable<Step> {
    const runtime = this.deps.runtimes.get(spec.runtime);
    const absent = become({ kind: 'absent', spec });
    if (!runtime) return of(absent, unknownRuntime(spec));
    const created$ = this.deps.prepare(spec).pipe(
      mergeMap((options) => runtime.createWorkload(spec, options)),
      map((id) => become({ kind: 'created', spec, id })),
      catchError((err: unknown) =>
        err instanceof ConfigurationError
          ? of(report(spec.instanceName, ExecutionState.startingFailed(err.message)))
          : of(become({ kind: 'retrying', spec, retries }), report(spec.instanceName, ExecutionState.starting(`Retry ${retries + 1}: ${causeOf(err)}`))),
      ),
    );
    return concat(of(absent), created$);
  }

  /** swdd~agent-workload-control-loop-executes-resume~1: a resumed workload gets a new Control Interface instance on its existing pipes. */
  private resume(spec: WorkloadSpec): Observable<Step> {
    const runtime = this.deps.runtimes.get(spec.runtime);
    const absent = become({ kind: 'absent', spec });
    if (!runtime) return of(absent, unknownRuntime(spec));
    return this.deps.prepare(spec).pipe(
      mergeMap(() => runtime.getWorkloadId(spec.instanceName)),
      catchError(() => of(undefined)),
      mergeMap((id) =>
        id === undefined
          ? of(absent, report(spec.instanceName, ExecutionState.lost('The workload to resume was not found.')))
          : of(become({ kind: 'created', spec, id })),
      ),
    );
  }

  /**
   * swdd~agent-workload-control-loop-executes-update~3, swdd~agent-workload-control-loop-executes-update-delete-only~1,
   * swdd~agent-workload-control-loop-reset-backoff-on-update~1,
   * swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2,
   * swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1: no create while the old one is still there.
   */
  private update(state: LoopState, next: WorkloadSpec | undefined): Observable<Step> {
    return this.removeCurrent(state, (after) => (next ? this.create(after, next) : EMPTY));
  }

  /**
   * swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-workload-control-loop-delete-broken-allowed~1:
   * a delete that fails is reported once (Stopping(DeleteFailed)) and the loop waits for the next command.
   */
  private delete(state: LoopState, instanceName: WorkloadInstanceName): Observable<Step> {
    if (state.kind === 'adopted') return concat(this.removeExisting(state.existing), of(END));
    // Never created (its create was still waiting): say so, so its pending state goes away.
    if (state.kind === 'idle') return of(report(instanceName, ExecutionState.removed()), END);
    return this.removeCurrent(state, () => of(END));
  }

  /**
   * swdd~workload-control-loop-restarts-workloads-using-update~1: a restart is an update to the same
   * config, and reported as one (Stopping(RequestedAtRuntime), Removed, Pending(Starting), …), so a server
   * sees it happen. A workload that succeeded is started again in place where its runtime can (as the
   * 1.x agent does), and re-created when that fails.
   */
  private restart(state: LoopState & { kind: 'created' }, succeeded: boolean): Observable<Step> {
    const { spec, id } = state;
    const recreate = defer(() => this.update(state, spec));
    const runtime = this.deps.runtimes.get(spec.runtime)!;
    if (!succeeded || !runtime.startAgain) return recreate;
    return concat(
      starting(spec),
      runtime.startAgain(id, spec).pipe(
        ignoreElements(),
        catchError(() => recreate),
      ),
    );
  }

  /**
   * Deletes the managed workload (when there is one) and releases its host side, then goes on with
   * `then` on the state that leaves. On failure the loop keeps the workload so the next command can
   * try again (swdd~agent-workload-control-loop-delete-failed-allows-retry~1).
   * swdd~agent-workload-control-loop-update-broken-allowed~1: with no id nothing is known on the
   * runtime; what may run under the name all the same (a create cut short) goes by name.
   */
  private removeCurrent(state: LoopState, then: (after: LoopState) => Observable<Step>): Observable<Step> {
    if (state.kind === 'idle' || state.kind === 'adopted') return then(state);
    const { spec } = state;
    const id = state.kind === 'created' || state.kind === 'deleteFailed' ? state.id : undefined;
    const runtime = this.deps.runtimes.get(spec.runtime);
    const remove$ =
      id !== undefined && runtime ? runtime.deleteWorkload(id) : (runtime?.deleteByName?.(spec.instanceName).pipe(catchError(() => EMPTY)) ?? EMPTY);
    return concat(
      of(report(spec.instanceName, ExecutionState.stoppingRequested())),
      failureOf(concat(remove$, this.deps.release(spec))).pipe(
        concatMap((failure) =>
          failure === undefined
            ? concat(
                of(become(IDLE), report(spec.instanceName, ExecutionState.removed())),
                defer(() => then(IDLE)),
              )
            : of(become({ kind: 'deleteFailed', spec, id }), report(spec.instanceName, ExecutionState.deleteFailed(failure))),
        ),
      ),
    );
  }

  /** swdd~agent-delete-old-workload~3: a workload of an earlier run, deleted by its id. */
  private removeExisting(existing: ExistingWorkload): Observable<Step> {
    const runtime = this.deps.runtimes.get(existing.runtime);
    const name = existing.instanceName;
    const deleted$ = runtime
      ? failureOf(runtime.deleteWorkload(existing.id)).pipe(
          map((failure) => report(name, failure === undefined ? ExecutionState.removed() : ExecutionState.deleteFailed(failure))),
        )
      : of(report(name, ExecutionState.deleteFailed(`Unknown runtime '${existing.runtime}'`)));
    return concat(of(report(name, ExecutionState.stoppingRequested())), deleted$);
  }

  /**
   * swdd~workload-control-loop-receives-workload-states~1, swdd~workload-control-loop-checks-workload-state-validity~1,
   * swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2, swdd~workload-control-loop-handles-workload-restarts~2
   */
  private watch({ spec, id }: LoopState & { kind: 'created' }): Observable<Step> {
    const runtime = this.deps.runtimes.get(spec.runtime)!;
    return runtime.checkState(id, spec.instanceName).pipe(
      mergeMap((state): Output[] => {
        const reported = report(spec.instanceName, state);
        return needsRestart(spec.restartPolicy, state) ? [reported, { command: { kind: 'restart', succeeded: state.state === 'Succeeded' } }] : [reported];
      }),
      catchError(() => of(report(spec.instanceName, ExecutionState.unknown('The state checker failed.')))),
    );
  }
}
