// The WorkloadControlLoop: executes the commands for one workload strictly in order and watches
// the workload's state in between, restarting it by its restart policy and retrying failed creates.
import {
  EMPTY,
  type MonoTypeOperatorFunction,
  type Observable,
  Subject,
  asyncScheduler,
  catchError,
  concat,
  concatMap,
  defer,
  endWith,
  finalize,
  identity,
  ignoreElements,
  map,
  merge,
  mergeMap,
  of,
  retry,
  takeWhile,
  tap,
  throwError,
  timer,
} from 'rxjs';
import { ExecutionState, formatState } from '../lib/execution-state.js';
import type { Logger } from '../lib/logger.js';
import type { WorkloadState } from '../lib/messages.js';
import { type CrashLoopBackoff, KUBELET_BACKOFF, needsRestart, nextRestart } from '../lib/restart-policy.js';
import type { RunningWorkloads } from '../lib/running-workloads.js';
import { ConfigurationError, type CreateOptions, type ExistingWorkload, type RuntimeConnector } from '../lib/runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, sameInstance } from '../lib/workload.js';
import { runThenFollow } from './run-then-follow.js';
import type { Trace } from './trace.js';
import {
  END,
  IDLE,
  type LoopState,
  type Running,
  type SelfCommand,
  type Step,
  type WorkloadCommand,
  become,
  createBackoffMs,
  report,
  self,
} from '../lib/workload-loop.js';

export interface ControlDeps {
  readonly runtimes: ReadonlyMap<string, RuntimeConnector>;
  /** Prepares the host side of a workload (Control Interface, files) before it is created. */
  readonly prepare: (spec: WorkloadSpec) => Observable<CreateOptions>;
  /** Undoes `prepare` once the workload is gone. */
  readonly release: (spec: WorkloadSpec) => Observable<never>;
  /** Removes what a create that failed must not leave behind (the workload's files). */
  readonly discard?: (spec: WorkloadSpec) => Observable<never>;
  /** A random fraction in [0, 1] for the jitter of create retries (the full backoff when not given). */
  readonly jitter?: () => number;
  /** Kept up to date with the workloads the loops have created (the log requests are resolved against it). */
  readonly running?: RunningWorkloads;
  /** How restarts of a workload that keeps exiting are spaced (kubelet's when not given). */
  readonly backoff?: CrashLoopBackoff;
  /** The time in ms (the scheduler's clock, virtual in marble specs). */
  readonly now?: () => number;
  /** --debug: the loops' commands and steps are traced as `workload.loop`. */
  readonly trace?: Trace;
  /** An update first has its new image on the node while the old instance runs (the released agent stops it first). */
  readonly pullAhead?: boolean;
  readonly log?: Logger;
}

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
export function controlWorkload(commands$: Observable<WorkloadCommand>, deps: ControlDeps, name = ''): Observable<WorkloadState> {
  return defer(() => {
    const steps = new LoopSteps(deps);
    // The loop's commands to itself (retry, exited, restart) come out of its own steps, which no stream built
    // before the loop can give it: this Subject closes that loop.
    const internal$ = new Subject<SelfCommand>();
    let state: LoopState = IDLE;
    const traced = deps.trace?.enabled('workload.loop') ? traceLoop(deps.trace, name) : { commands: identity, steps: identity };
    return merge<Array<WorkloadCommand | SelfCommand>>(commands$, internal$).pipe(
      traced.commands,
      runThenFollow(
        (command) => defer(() => steps.execute(state, command)),
        () => steps.follow(state),
      ),
      traced.steps,
      takeWhile((step): step is Exclude<Step, { kind: 'end' }> => step.kind !== 'end'),
      mergeMap((step): WorkloadState[] => {
        switch (step.kind) {
          case 'report':
            return [step.state];
          case 'become':
            noteRunning(deps.running, state, step.state);
            state = step.state;
            return [];
          case 'self':
            internal$.next(step.command);
            return [];
        }
      }),
    );
  });
}

/** --debug: a loop's commands and steps, in words, as `workload.loop`. */
function traceLoop(trace: Trace, name: string) {
  const tell = <T>(describe: (value: T) => string): MonoTypeOperatorFunction<T> => tap((value) => trace.note('workload.loop', `${name}: ${describe(value)}`));
  return {
    commands: tell<WorkloadCommand | SelfCommand>((c) => `command ${c.kind}`),
    steps: tell<Step>((step) => {
      switch (step.kind) {
        case 'report':
          return `reports ${formatState(step.state.executionState)}`;
        case 'become':
          return `is ${step.state.kind}${'id' in step.state ? ` (${String(step.state.id).slice(0, 12)})` : ''}`;
        case 'self':
          return `tells itself ${step.command.kind}`;
        case 'end':
          return 'ends';
      }
    }),
  };
}

/** Keeps `running` in step with a loop whose state changes from `from` to `to`. */
function noteRunning(running: RunningWorkloads | undefined, from: LoopState, to: LoopState): void {
  if (from.kind === 'created' || from.kind === 'fetching') running?.delete(from.spec.instanceName);
  if (to.kind === 'created' || to.kind === 'fetching') running?.set(to.spec.instanceName, { runtime: to.runtime, id: to.id });
}

/** The steps a loop can take on its workload, each a function of the loop's state when it starts. */
class LoopSteps {
  private readonly backoff: CrashLoopBackoff;
  private readonly now: () => number;

  constructor(private readonly deps: ControlDeps) {
    this.backoff = deps.backoff ?? KUBELET_BACKOFF;
    this.now = deps.now ?? (() => asyncScheduler.now());
  }

  execute(state: LoopState, command: WorkloadCommand | SelfCommand): Observable<Step> {
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
        return state.kind === 'retrying' ? this.attempt(state.spec, state.retries + 1, state.shortRuns) : EMPTY;
      case 'exited':
        return state.kind === 'created' ? this.exited(state, command.succeeded, command.exit) : EMPTY;
      case 'restart':
        return state.kind === 'backingOff' ? this.restart(state, state.succeeded) : EMPTY;
      case 'fetched':
        return state.kind === 'fetching' ? this.replace(state, state.next) : EMPTY;
    }
  }

  /** What runs until the next command: the state watch, or the wait for the next retry or restart. */
  follow(state: LoopState): Observable<Step> {
    switch (state.kind) {
      case 'created':
        return this.watch(state);
      case 'retrying':
        // swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1,
        // swdd~agent-workload-control-loop-exponential-backoff-retries~1
        return timer(createBackoffMs(state.retries, this.deps.jitter?.() ?? 1)).pipe(map(() => self({ kind: 'retry' })));
      case 'backingOff':
        return timer(state.delayMs).pipe(map(() => self({ kind: 'restart' })));
      case 'fetching':
        return merge(this.watch(state, false), this.fetch(state));
      default:
        return EMPTY;
    }
  }

  /** Created (or started again) under `id` just now. */
  private created(spec: WorkloadSpec, runtime: RuntimeConnector, id: unknown, shortRuns: number): Step {
    return become({ kind: 'created', spec, runtime, id, startedAt: this.now(), shortRuns });
  }

  /**
   * swdd~agent-workload-control-loop-executes-create~4, swdd~agent-skips-unknown-runtime~1: a kept workload
   * of an earlier run with the same config is started again in place (a new one is created when that
   * fails); one of another config is deleted first.
   */
  private create(state: LoopState, spec: WorkloadSpec, shortRuns = 0): Observable<Step> {
    const reusable = state.kind === 'adopted' ? state.existing : undefined;
    const runtime = this.deps.runtimes.get(spec.runtime);
    if (!reusable) return concat(starting(spec), this.attempt(spec, 0, shortRuns));
    if (!runtime?.startAgain || !sameInstance(reusable.instanceName, spec.instanceName)) {
      return concat(this.removeExisting(reusable), starting(spec), this.attempt(spec, 0, shortRuns));
    }
    const startAgain$ = concat(this.deps.prepare(spec), runtime.startAgain(reusable.id, spec)).pipe(ignoreElements());
    return concat(
      of(become({ kind: 'absent', spec })),
      starting(spec),
      startAgain$.pipe(
        endWith(this.created(spec, runtime, reusable.id, shortRuns)),
        catchError(() => concat(this.removeExisting(reusable), starting(spec), this.attempt(spec, 0, shortRuns))),
      ),
    );
  }

  /**
   * Create attempt `retries + 1`. swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1,
   * swdd~agent-workload-control-loop-handles-failed-workload-creation~1,
   * swdd~agent-workload-control-loop-aborts-create-upon-workload-files-creation-error~1: whatever failed (the host
   * side, the runtime config, the runtime), the workload's files go; a failure is reported Pending(Starting)
   * "Retry <n>: <cause>" and retried; a config the runtime refuses is not.
   */
  private attempt(spec: WorkloadSpec, retries: number, shortRuns: number): Observable<Step> {
    const runtime = this.deps.runtimes.get(spec.runtime);
    const absent = become({ kind: 'absent', spec });
    if (!runtime) return of(absent, unknownRuntime(spec));
    const discarded$ = defer(() => this.deps.discard?.(spec) ?? EMPTY).pipe(catchError(() => EMPTY));
    const created$ = this.deps.prepare(spec).pipe(
      mergeMap((options) => runtime.createWorkload(spec, options)),
      map((id) => this.created(spec, runtime, id, shortRuns)),
      catchError((err: unknown) =>
        concat(
          discarded$,
          err instanceof ConfigurationError
            ? of(report(spec.instanceName, ExecutionState.startingFailed(err.message)))
            : of(
                become({ kind: 'retrying', spec, retries, shortRuns }),
                report(spec.instanceName, ExecutionState.starting(`Retry ${retries + 1}: ${causeOf(err)}`)),
              ),
        ),
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
          : of(this.created(spec, runtime, id, 0)),
      ),
    );
  }

  /**
   * swdd~agent-workload-control-loop-executes-update~3, swdd~agent-workload-control-loop-executes-update-delete-only~1,
   * swdd~agent-workload-control-loop-reset-backoff-on-update~1,
   * swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2,
   * swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1: no create while the old one is still there.
   * An update starts the crash-loop back-off anew too.
   */
  private update(state: LoopState, next: WorkloadSpec | undefined): Observable<Step> {
    const running = state.kind === 'created' || state.kind === 'fetching';
    if (next && this.deps.pullAhead && running && this.deps.runtimes.get(next.runtime)?.fetchImage?.(next, state.spec)) {
      return concat(this.abandoned(state, next), of(become({ ...state, kind: 'fetching', next })));
    }
    return concat(this.abandoned(state, next), this.replace(state, next));
  }

  /**
   * The update whose image was being pulled, given up for another update or a delete: its instance is reported
   * Removed, as the released agent reports an update's instance it removes, so that no server keeps its state.
   */
  private abandoned(state: LoopState, next?: WorkloadSpec): Observable<Step> {
    if (state.kind !== 'fetching' || (next && sameInstance(next.instanceName, state.next.instanceName))) return EMPTY;
    return of(report(state.next.instanceName, ExecutionState.removed()));
  }

  /** The current workload removed, then `next` (if any) created. */
  private replace(state: LoopState, next: WorkloadSpec | undefined, shortRuns = 0): Observable<Step> {
    return this.removeCurrent(state, (after) => (next ? this.create(after, next, shortRuns) : EMPTY));
  }

  /**
   * The pull of an update's new image, while the old instance runs; after a failure, again after the create
   * back-off, until it succeeds or another command comes. A failure is logged and reported on the new instance
   * as the released agent reports a failed create (Pending(Starting) "Retry <n>: <cause>"). A config that
   * cannot be read goes on to the update, whose create reports it as the released agent does.
   */
  private fetch({ next, spec }: LoopState & { kind: 'fetching' }): Observable<Step> {
    const runtime = this.deps.runtimes.get(next.runtime)!;
    const name = next.instanceName.workloadName;
    const failures$ = new Subject<Step>();
    // What the pull waits for is said on the new instance, as a failure is.
    const pulled$ = defer(() => runtime.fetchImage!(next, spec) ?? EMPTY).pipe(
      map((note): Step => report(next.instanceName, ExecutionState.starting(`${note} (the old instance runs until the image is pulled)`))),
      retry({
        delay: (err: unknown, tries: number) => {
          if (err instanceof ConfigurationError) return throwError(() => err);
          const cause = causeOf(err);
          this.deps.log?.warn(`The update of '${name}' waits, its old instance running: ${cause} (try ${tries}; the next after a back-off).`);
          failures$.next(report(next.instanceName, ExecutionState.starting(`Retry ${tries}: ${cause} (the old instance runs until the image is pulled)`)));
          return timer(createBackoffMs(tries - 1, this.deps.jitter?.() ?? 1));
        },
      }),
      catchError(() => EMPTY),
      endWith(self({ kind: 'fetched' })),
      finalize(() => failures$.complete()),
    );
    return merge(failures$, pulled$);
  }

  /**
   * swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-workload-control-loop-delete-broken-allowed~1:
   * a delete that fails is reported once (Stopping(DeleteFailed)) and the loop waits for the next command.
   */
  private delete(state: LoopState, instanceName: WorkloadInstanceName): Observable<Step> {
    if (state.kind === 'adopted') return concat(this.removeExisting(state.existing), of(END));
    // Never created (its create was still waiting): say so, so its pending state goes away.
    if (state.kind === 'idle') return of(report(instanceName, ExecutionState.removed()), END);
    return concat(
      this.abandoned(state),
      this.removeCurrent(state, () => of(END)),
    );
  }

  /**
   * The workload ended and its policy restarts it: at once after a long run, else after the crash-loop
   * back-off, which the state tells while it lasts (an update or a delete ends it at once).
   */
  private exited(state: LoopState & { kind: 'created' }, succeeded: boolean, exit: ExecutionState): Observable<Step> {
    const { shortRuns, delayMs } = nextRestart(state.shortRuns, this.now() - state.startedAt, this.backoff);
    if (delayMs === 0) return this.restart({ ...state, shortRuns }, succeeded);
    const last = succeeded ? "Exit code: '0'" : exit.additionalInfo || formatState(exit);
    const info = `Restart ${shortRuns} of a workload that keeps exiting (last: ${last}), in ${Math.round(delayMs / 1000)} s (crash-loop back-off).`;
    return of(become({ ...state, kind: 'backingOff', shortRuns, succeeded, delayMs }), report(state.spec.instanceName, ExecutionState.waitingToStart(info)));
  }

  /**
   * swdd~workload-control-loop-restarts-workloads-using-update~1: a restart is an update to the same
   * config, and reported as one (Stopping(RequestedAtRuntime), Removed, Pending(Starting), …), so a server
   * sees it happen. A workload that succeeded is started again in place where its runtime can (as the
   * 1.x agent does), and re-created when that fails.
   */
  private restart(state: Running, succeeded: boolean): Observable<Step> {
    const { spec, runtime, id, shortRuns } = state;
    const current: LoopState = { ...state, kind: 'created' };
    const recreate = defer(() => this.replace(current, spec, shortRuns));
    if (!succeeded || !runtime.startAgain) return recreate;
    return concat(
      starting(spec),
      runtime.startAgain(id, spec).pipe(
        ignoreElements(),
        endWith(this.created(spec, runtime, id, shortRuns)),
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
    const id = state.kind === 'created' || state.kind === 'backingOff' || state.kind === 'fetching' || state.kind === 'deleteFailed' ? state.id : undefined;
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
  private watch({ spec, runtime, id }: Running, restarts = true): Observable<Step> {
    return runtime.checkState(id, spec).pipe(
      mergeMap((state): Observable<Step> => {
        const reported = of(report(spec.instanceName, state));
        // rx~health-unhealthy-fails-and-stops~1: an unhealthy workload is stopped (and kept) before its
        // restart policy acts, so that it does not serve while a restart waits.
        const stop$ =
          state.health === 'unhealthy' && runtime.stop
            ? runtime.stop(id).pipe(
                ignoreElements(),
                catchError(() => EMPTY),
              )
            : EMPTY;
        const exited$ =
          restarts && needsRestart(spec.restartPolicy, state) ? of(self({ kind: 'exited', succeeded: state.state === 'Succeeded', exit: state })) : EMPTY;
        return concat(reported, stop$, exited$);
      }),
      catchError(() => of(report(spec.instanceName, ExecutionState.unknown('The state checker failed.')))),
    );
  }
}
