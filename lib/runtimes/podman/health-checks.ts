// Health checks of containers (lib/runtimes/podman/health.ts has the rules): the check loop, the overlay on a
// workload's state, and the health of a pod's probed containers; both podman runtimes use them.
import {
  EMPTY,
  asyncScheduler,
  type Observable,
  catchError,
  defer,
  distinctUntilChanged,
  exhaustMap,
  map,
  merge,
  mergeMap,
  of,
  scan,
  startWith,
  switchMap,
  takeWhile,
  timer,
} from 'rxjs';
import { type ExecutionState, heardAt, is, sameState } from '../../execution-state.js';
import type { Cli } from '../base/cli.js';
import { type CheckResult, type Health, type HealthCheck, NO_CHECK_YET, combinedHealth, healthOfInspect, healthState, nextHealth, timedOut } from './health.js';

/** What the checks ask of the container CLI: a check run in the container, and (where Podman's timers run them) its inspect. */
export type Checker = Pick<Cli, 'check' | 'run'>;

/**
 * A health-checked workload's state (lib/runtimes/podman/health.ts): while its containers run, `health$` (subscribed
 * anew each time they run) decides; once unhealthy it stays Failed until they run again.
 */
export function withHealth(container$: Observable<ExecutionState>, health$: () => Observable<Health>, check: HealthCheck): Observable<ExecutionState> {
  return container$.pipe(
    switchMap((state) =>
      (is(state, 'Running', 'Ok') ? health$().pipe(startWith(undefined)) : of(undefined)).pipe(
        // A check's result is the change its state shows; without one, the container's change is.
        map((health) => ({ state, health, at: health ? asyncScheduler.now() : state.heardAt })),
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
        exhaustMap(() => cli.run(['inspect', '--format', '{{json .State.Health}}', id], undefined, 'query').pipe(catchError(() => EMPTY))),
        map(healthOfInspect),
      )
    : defer(() => {
        const started = asyncScheduler.now();
        return timer(check.intervalMs, check.intervalMs).pipe(
          exhaustMap(() => cli.check(id, check.argv, check.timeoutMs)),
          mergeMap((outcome): Observable<CheckResult> => {
            if (outcome.kind === 'not-run') return EMPTY;
            const output = outcome.kind === 'timed-out' ? timedOut(check) : outcome.output;
            return of({ passed: outcome.kind === 'passed', output, sinceStartMs: asyncScheduler.now() - started });
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
