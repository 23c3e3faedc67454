// Health checks of containers (lib/runtimes/podman/health.ts has the rules): the check loop, the overlay on a
// workload's state, and the health of a pod's probed containers; both podman runtimes use them.
import { randomBytes } from 'node:crypto';
import {
  EMPTY,
  type Observable,
  catchError,
  defer,
  distinctUntilChanged,
  exhaustMap,
  finalize,
  map,
  merge,
  mergeMap,
  of,
  scan,
  startWith,
  switchMap,
  takeWhile,
  tap,
  timer,
  type TimestampProvider,
} from 'rxjs';
import { killMarkedProcesses } from '../../drivers/machine.js';
import { type ExecutionState, heardAt, is, sameState } from '../../execution-state.js';
import type { PodmanCli } from './podman-cli.js';
import { type CheckResult, type Health, type HealthCheck, NO_CHECK_YET, combinedHealth, healthOfInspect, healthState, nextHealth, timedOut } from './health.js';

/** What the checks ask of the container CLI: a check run in the container, and (where Podman's timers run them) its inspect. */
export type Checker = Pick<PodmanCli, 'exec' | 'healthState' | 'clock'>;

/** How a health check in a container ended: `output` is the start of what it wrote on stdout and stderr. */
export type CheckOutcome =
  | { readonly kind: 'passed' | 'failed'; readonly output: string }
  /** Still running at its timeout: killed, with all it started. */
  | { readonly kind: 'timed-out'; readonly output: string }
  /** Podman could not run it (the container is not running): it says nothing of the health. */
  | { readonly kind: 'not-run'; readonly output: string };

/** The variable that marks a check's processes in the container, so that all of them can be found and killed. */
const CHECK_MARK = 'ANKAGENT_HEALTH_CHECK';
/** How much of a check's output is kept (a state shows 512 characters of it). */
const MAX_CHECK_OUTPUT_BYTES = 4096;
/** Checks run by the local CLI whatever the service (lib/runtimes/podman/service.ts): it keeps every exec session. */
const EXEC_WAY = 'CLI (the service keeps every exec session)';
/** Podman's own exit code for "podman failed" (not the check's): nerdctl's and Docker's alike. */
const PODMAN_FAILED = 125;

/**
 * Runs a health check in a running container (`podman exec`). A check still running at `timeoutMs` has failed:
 * it is killed, and so is everything it started in the container, found by the variable it carries (`podman
 * exec` leaves them running when its client dies). The same when the check is cancelled.
 */
export function checkInContainer(cli: Checker, container: string, argv: readonly string[], timeoutMs: number): Observable<CheckOutcome> {
  return defer(() => {
    const marker = `${CHECK_MARK}=${randomBytes(12).toString('hex')}`;
    let ended = false;
    return cli.exec(container, marker, argv, timeoutMs, MAX_CHECK_OUTPUT_BYTES, EXEC_WAY).pipe(
      map((attempt): CheckOutcome => {
        if (attempt.kind !== 'exited') return attempt;
        return { kind: attempt.code === 0 ? 'passed' : attempt.code === PODMAN_FAILED ? 'not-run' : 'failed', output: attempt.output };
      }),
      tap((outcome) => (ended = outcome.kind !== 'timed-out')),
      finalize(() => ended || setImmediate(() => killMarkedProcesses(marker))),
    );
  });
}

/**
 * A health-checked workload's state (lib/runtimes/podman/health.ts): while its containers run, `health$` (subscribed
 * anew each time they run) decides; once unhealthy it stays Failed until they run again.
 */
export function withHealth(
  container$: Observable<ExecutionState>,
  health$: () => Observable<Health>,
  check: HealthCheck,
  clock: TimestampProvider,
): Observable<ExecutionState> {
  return container$.pipe(
    switchMap((state) =>
      (is(state, 'Running', 'Ok') ? health$().pipe(startWith(undefined)) : of(undefined)).pipe(
        // A check's result is the change its state shows; without one, the container's change is.
        map((health) => ({ state, health, at: health ? clock.now() : state.heardAt })),
      ),
    ),
    scan((shown: { failedWith?: string; state?: ExecutionState; at?: number }, { state, health, at }) => {
      const failedWith = health?.status === 'unhealthy' ? health.output : is(state, 'Running') ? undefined : shown.failedWith;
      return { failedWith, state: healthState(state, health, failedWith, check), at };
    }, {}),
    map((shown) => heardAt(shown.state!, shown.at)),
    distinctUntilChanged(sameState),
  );
}

/**
 * A container's health, checked once per interval (never two checks at once) and counted by Podman's rule
 * (`nextHealth`): a check that outlives its timeout has failed. An unhealthy container is checked no more
 * (the control loop stops it). A check that cannot run (the container stopped) says nothing. Where Podman's own timers run the
 * checks (`podmanRunsThem`), the agent only reads the status they leave: each check runs once.
 */
export function healthChecks(cli: Checker, id: string, check: HealthCheck, podmanRunsThem = false): Observable<Health> {
  const statuses$ = podmanRunsThem
    ? timer(check.intervalMs, check.intervalMs).pipe(
        exhaustMap(() => cli.healthState(id).pipe(catchError(() => EMPTY))),
        map(healthOfInspect),
      )
    : defer(() => {
        const started = cli.clock.now();
        return timer(check.intervalMs, check.intervalMs).pipe(
          exhaustMap(() => checkInContainer(cli, id, check.argv, check.timeoutMs)),
          mergeMap((outcome): Observable<CheckResult> => {
            if (outcome.kind === 'not-run') return EMPTY;
            const output = outcome.kind === 'timed-out' ? timedOut(check) : outcome.output;
            return of({ passed: outcome.kind === 'passed', output, sinceStartMs: cli.clock.now() - started });
          }),
          scan((count, result) => nextHealth(count, result, check), NO_CHECK_YET),
          map((count) => count.health),
        );
      });
  return statuses$.pipe(takeWhile((health) => health.status !== 'unhealthy', true));
}

/** A container of a podman-kube workload with the health check Podman made of its livenessProbe. */
export interface Probe {
  readonly id: string;
  readonly name: string;
  readonly check: HealthCheck;
}

/** The health of all probed containers of a workload, each checked on its own interval (by Podman's timers where they run). */
export const probesHealth = (cli: Checker, probes: readonly Probe[], podmanTimers: boolean): Observable<Health> =>
  merge(...probes.map((p, i) => healthChecks(cli, p.id, p.check, podmanTimers).pipe(map((health) => ({ i, health }))))).pipe(
    scan(
      (latest, { i, health }) => latest.map((c, j) => (j === i ? { ...c, health } : c)),
      probes.map((p): { name: string; health?: Health } => ({ name: p.name })),
    ),
    map((latest): Health => combinedHealth(latest) ?? { status: 'starting' }),
  );
