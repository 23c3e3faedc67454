// The WorkloadControlLoop: executes the commands for one workload strictly in order and watches
// the workload's state in between, restarting it by its restart policy and retrying failed creates.
import {
  EMPTY,
  type Observable,
  Subject,
  catchError,
  concat,
  concatWith,
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
}

type Output = WorkloadState | { readonly command: WorkloadCommand };
const END = Symbol('end of loop');

const report = (instanceName: WorkloadInstanceName, executionState: ExecutionState): WorkloadState => ({ instanceName, executionState });
const causeOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));
/** swdd~agent-skips-unknown-runtime~2: a runtime the agent does not have (or has not enabled), in the released agent's words. */
const unknownRuntime = (spec: WorkloadSpec) => report(spec.instanceName, ExecutionState.startingFailed('Unsupported Runtime'));

/**
 * swdd~agent-create-workload~2, swdd~agent-resume-workload~2: one loop per workload, fed by `commands$`.
 * Each command runs to its end before the next starts; what follows it (watching the state, waiting
 * for a retry) lasts until the next command arrives.
 */
export function controlWorkload(commands$: Observable<WorkloadCommand>, deps: ControlDeps): Observable<WorkloadState> {
  return defer(() => {
    const loop = new ControlLoop(deps);
    const internal$ = new Subject<WorkloadCommand>();
    return merge(commands$, internal$).pipe(
      runThenFollow(
        (command) => loop.execute(command),
        () => loop.follow(),
      ),
      takeWhile((out): out is Output => out !== END),
      tap((out) => 'command' in out && internal$.next(out.command)),
      filter((out): out is WorkloadState => !('command' in out)),
    );
  });
}

/** The workload one loop manages, and the steps it can take on it. */
class ControlLoop {
  /** The config the loop manages (used for retries and restarts). */
  private spec?: WorkloadSpec;
  /** The runtime's id of the workload, once created or resumed. */
  private id?: unknown;
  private retries = 0;
  /** Why the last create failed, while a retry is due. */
  private failure?: string;
  private ended = false;
  /** A workload of an earlier run, kept for the next create to start again (not watched until then). */
  private reusable?: ExistingWorkload;
  /** The last delete failed: the loop waits for the next command and watches nothing meanwhile. */
  private deleteFailed = false;

  constructor(private readonly deps: ControlDeps) {}

  execute(command: WorkloadCommand): Observable<Output | typeof END> {
    this.deleteFailed = false;
    switch (command.kind) {
      case 'create':
        return this.create(command.spec);
      case 'resume':
        return this.resume(command.spec);
      case 'update':
        return this.update(command.spec);
      case 'delete':
        return this.delete(command.instanceName);
      case 'removeExisting':
        return this.removeExisting(command.existing, command.final);
      case 'adopt':
        this.reusable = command.existing;
        return EMPTY;
      case 'retry':
        return this.retry();
      case 'restart':
        return this.restart(command.succeeded);
    }
  }

  /** What runs until the next command: the state watch, or the wait for the next retry. */
  follow(): Observable<Output | typeof END> {
    const { spec, id } = this;
    if (this.ended) return of(END);
    if (this.deleteFailed) return EMPTY;
    if (spec && id !== undefined) return this.watch(spec, id);
    if (spec && this.failure !== undefined) {
      // swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1,
      // swdd~agent-workload-control-loop-exponential-backoff-retries~1
      const wait = createBackoffMs(this.retries, this.deps.jitter?.() ?? 1);
      return timer(wait).pipe(map(() => ({ command: { kind: 'retry' } as const })));
    }
    return EMPTY;
  }

  /**
   * swdd~agent-workload-control-loop-executes-create~4, swdd~agent-skips-unknown-runtime~1: a kept workload
   * of an earlier run with the same config is started again in place (a new one is created when that
   * fails); one of another config is deleted first.
   */
  private create(spec: WorkloadSpec): Observable<Output> {
    const reusable = this.reusable;
    this.reusable = undefined;
    this.spec = spec;
    this.retries = 0;
    const runtime = this.deps.runtimes.get(spec.runtime);
    const starting = of(report(spec.instanceName, ExecutionState.starting('Triggered at runtime.')));
    if (reusable && runtime?.startAgain && sameInstance(reusable.instanceName, spec.instanceName)) {
      const startAgain = runtime.startAgain.bind(runtime);
      return concat(
        starting,
        concat(
          this.deps.prepare(spec).pipe(ignoreElements()),
          startAgain(reusable.id, spec).pipe(ignoreElements()),
          defer(() => {
            this.id = reusable.id;
            return EMPTY;
          }),
        ).pipe(catchError(() => concat(this.removeExisting(reusable, false), starting, this.attempt(spec)))),
      );
    }
    const dropped = reusable ? this.removeExisting(reusable, false) : EMPTY;
    if (!runtime) return concat(dropped, starting, of(unknownRuntime(spec)));
    return concat(dropped, starting, this.attempt(spec));
  }

  /** swdd~agent-workload-control-loop-executes-retry~1: retries have no limit; only another command ends them. */
  private retry(): Observable<Output> {
    if (!this.spec || this.failure === undefined) return EMPTY;
    this.retries += 1;
    return this.attempt(this.spec);
  }

  private attempt(spec: WorkloadSpec): Observable<Output> {
    this.failure = undefined;
    const runtime = this.deps.runtimes.get(spec.runtime);
    if (!runtime) return of(unknownRuntime(spec));
    return this.deps.prepare(spec).pipe(
      mergeMap((options) => runtime.createWorkload(spec, options)),
      tap((id) => (this.id = id)),
      ignoreElements(),
      catchError((err: unknown) =>
        of(err instanceof ConfigurationError ? report(spec.instanceName, ExecutionState.startingFailed(err.message)) : this.createFailed(spec, causeOf(err))),
      ),
    );
  }

  /**
   * swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1,
   * swdd~agent-workload-control-loop-handles-failed-workload-creation~1: Pending(Starting) "Retry <n>: <cause>".
   */
  private createFailed(spec: WorkloadSpec, cause: string): WorkloadState {
    this.failure = cause;
    return report(spec.instanceName, ExecutionState.starting(`Retry ${this.retries + 1}: ${cause}`));
  }

  /** swdd~agent-workload-control-loop-executes-resume~1 */
  private resume(spec: WorkloadSpec): Observable<Output> {
    this.spec = spec;
    const runtime = this.deps.runtimes.get(spec.runtime);
    if (!runtime) return of(unknownRuntime(spec));
    // A resumed workload gets a new Control Interface instance on its existing pipes.
    return this.deps.prepare(spec).pipe(
      mergeMap(() => runtime.getWorkloadId(spec.instanceName)),
      catchError(() => of(undefined)),
      mergeMap((id) => {
        this.id = id;
        return id === undefined ? of(report(spec.instanceName, ExecutionState.lost('The workload to resume was not found.'))) : EMPTY;
      }),
    );
  }

  /**
   * swdd~agent-workload-control-loop-executes-update~3, swdd~agent-workload-control-loop-executes-update-delete-only~1,
   * swdd~agent-workload-control-loop-reset-backoff-on-update~1,
   * swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2
   */
  private update(next: WorkloadSpec | undefined): Observable<Output> {
    this.failure = undefined;
    return concat(this.removeCurrent({ report: true }), this.thenCreate(next));
  }

  /**
   * swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-workload-control-loop-delete-broken-allowed~1:
   * a delete that fails is reported once (Stopping(DeleteFailed)) and the loop waits for the next command.
   */
  private delete(instanceName: WorkloadInstanceName): Observable<Output> {
    this.failure = undefined;
    const { reusable } = this;
    if (reusable) {
      this.reusable = undefined;
      return this.removeExisting(reusable, true);
    }
    const managed = this.spec !== undefined;
    return concat(
      this.removeCurrent({ report: true }),
      defer(() => {
        if (this.spec !== undefined) return EMPTY;
        this.ended = true;
        // Never created (its create was still waiting): say so, so its pending state goes away.
        return managed ? EMPTY : of(report(instanceName, ExecutionState.removed()));
      }),
    );
  }

  /**
   * swdd~workload-control-loop-restarts-workloads-using-update~1: a restart is an update to the same
   * config, and reported as one (Stopping(RequestedAtRuntime), Removed, Pending(Starting), …), so a server
   * sees it happen. A workload that succeeded is started again in place where its runtime can (as the
   * 1.x agent does), and re-created when that fails.
   */
  private restart(succeeded: boolean): Observable<Output> {
    const { spec, id } = this;
    if (!spec) return EMPTY;
    const recreate = defer(() => concat(this.removeCurrent({ report: true }), this.thenCreate(spec)));
    const runtime = this.deps.runtimes.get(spec.runtime)!;
    if (!succeeded || id === undefined || !runtime.startAgain) return recreate;
    return concat(
      of(report(spec.instanceName, ExecutionState.starting('Triggered at runtime.'))),
      runtime.startAgain(id, spec).pipe(
        ignoreElements(),
        catchError(() => recreate),
      ),
    );
  }

  /** swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1: no create while the old one is still there. */
  private thenCreate(spec: WorkloadSpec | undefined): Observable<Output> {
    return defer(() => (spec && this.id === undefined ? this.create(spec) : EMPTY));
  }

  /**
   * Deletes the managed workload (when there is one) and releases its host side. On failure the
   * loop keeps the workload so the next command can try again
   * (swdd~agent-workload-control-loop-delete-failed-allows-retry~1).
   */
  private removeCurrent({ report: reporting }: { report: boolean }): Observable<Output> {
    const { spec, id } = this;
    if (!spec) return EMPTY;
    const gone$ = defer(() => {
      this.spec = undefined;
      this.id = undefined;
      return concat(this.deps.release(spec), reporting ? of(report(spec.instanceName, ExecutionState.removed())) : EMPTY);
    });
    const runtime = this.deps.runtimes.get(spec.runtime);
    // swdd~agent-workload-control-loop-update-broken-allowed~1: no id, nothing known on the runtime; what
    // may run under the name all the same (a create cut short) goes by name.
    const stopping$ = reporting ? of(report(spec.instanceName, ExecutionState.stoppingRequested())) : EMPTY;
    if (id === undefined || !runtime) {
      const byName$ = runtime?.deleteByName
        ? runtime.deleteByName(spec.instanceName).pipe(
            ignoreElements(),
            catchError(() => EMPTY),
          )
        : EMPTY;
      return concat(stopping$, byName$, gone$);
    }
    return concat(
      stopping$,
      runtime.deleteWorkload(id).pipe(
        ignoreElements(),
        concatWith(gone$),
        catchError((err: unknown) =>
          defer(() => {
            this.deleteFailed = true;
            return of(report(spec.instanceName, ExecutionState.deleteFailed(causeOf(err))));
          }),
        ),
      ),
    );
  }

  /** swdd~agent-delete-old-workload~3: a workload of an earlier run, deleted by its id. */
  private removeExisting(existing: ExistingWorkload, final: boolean): Observable<Output> {
    const runtime = this.deps.runtimes.get(existing.runtime);
    const name = existing.instanceName;
    const deleted$ = runtime
      ? runtime.deleteWorkload(existing.id).pipe(
          ignoreElements(),
          endWith(report(name, ExecutionState.removed())),
          catchError((err: unknown) => of(report(name, ExecutionState.deleteFailed(causeOf(err))))),
        )
      : of(report(name, ExecutionState.deleteFailed(`Unknown runtime '${existing.runtime}'`)));
    if (final) this.ended = true;
    return concat(of(report(name, ExecutionState.stoppingRequested())), deleted$);
  }

  /**
   * swdd~workload-control-loop-receives-workload-states~1, swdd~workload-control-loop-checks-workload-state-validity~1,
   * swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2, swdd~workload-control-loop-handles-workload-restarts~2
   */
  private watch(spec: WorkloadSpec, id: unknown): Observable<Output> {
    const runtime = this.deps.runtimes.get(spec.runtime)!;
    return runtime.checkState(id, spec.instanceName).pipe(
      filter(() => this.spec !== undefined && sameInstance(this.spec.instanceName, spec.instanceName)),
      mergeMap((state): Output[] => {
        const reported = report(spec.instanceName, state);
        return needsRestart(spec.restartPolicy, state) ? [reported, { command: { kind: 'restart', succeeded: state.state === 'Succeeded' } }] : [reported];
      }),
      catchError(() => of(report(spec.instanceName, ExecutionState.unknown('The state checker failed.')))),
    );
  }
}
