// The health stream in virtual time (lib/runtimes/podman/health-checks.ts): the checks on their interval and the
// state they make of the container's, with a checker whose outcomes the spec chooses.
import { expect } from 'chai';
import { NEVER, Observable, Subject, of, takeUntil, timer, asyncScheduler } from 'rxjs';
import { ExecutionState, exitedWith, formatState } from '../../lib/execution-state.js';
import type { Attempt } from '../../lib/runtimes/base/cli.js';
import type { HealthCheck } from '../../lib/runtimes/podman/health.js';
import { type CheckOutcome, type Checker, healthChecks, withHealth } from '../../lib/runtimes/podman/health-checks.js';
import { record, testScheduler } from '../helpers/virtual-time.js';

const check: HealthCheck = { command: 'cat /tmp/ok', argv: ['/bin/sh', '-c', 'cat /tmp/ok'], intervalMs: 1000, timeoutMs: 500, retries: 2, startPeriodMs: 0 };
const WAITING = "Pending(Starting): Waiting for its health check to pass ('cat /tmp/ok').";
const failedWith = (output: string) => `Failed(ExecFailed): Health check 'cat /tmp/ok' failed: ${output}`;

/** How `podman exec` ends for each outcome: a check's exit code, or Podman's own 125 when it cannot run it. */
const ATTEMPTS: Record<CheckOutcome['kind'], Attempt> = {
  passed: { kind: 'exited', code: 0, output: '' },
  failed: { kind: 'exited', code: 1, output: 'no file' },
  'not-run': { kind: 'exited', code: 125, output: 'no file' },
  'timed-out': { kind: 'timed-out', output: '' },
};

/** A checker whose n-th check ends as `outcomes[n]` after `delay` (the last outcome again once they run out); it counts its checks. */
function virtualChecker(outcomes: readonly CheckOutcome['kind'][], delay: (ms: number) => Observable<unknown>): Checker & { checks: number } {
  const checker = {
    checks: 0,
    exec: (): Observable<Attempt> => {
      const kind = outcomes[Math.min(checker.checks, outcomes.length - 1)];
      checker.checks += 1;
      return new Observable<Attempt>((subscriber) =>
        delay(10).subscribe(() => {
          subscriber.next(ATTEMPTS[kind]);
          subscriber.complete();
        }),
      );
    },
    healthState: () => NEVER,
    clock: asyncScheduler,
  };
  return checker as unknown as Checker & { checks: number };
}

describe('the health stream, in virtual time (lib/runtimes/podman/health-checks.ts)', () => {
  // rx~health-runs-checks-on-interval~1, rx~health-starting-until-healthy~1, rx~health-running-when-healthy~1
  it('a running container is Pending(Starting) until a check passes, and Running(Ok) only then, heard when the check ended', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold }) => {
      const checker = virtualChecker(['failed', 'passed'], (ms) => cold(`${ms}ms (x|)`));
      const container$ = cold('a', { a: { ...ExecutionState.running(), heardAt: 0 } });
      const shown = record(withHealth(container$, () => healthChecks(checker, 'id1', check), check, asyncScheduler).pipe(takeUntil(timer(20_000))), scheduler);
      scheduler.flush();
      expect(shown.values.map(([at, s]) => [at, formatState(s), s.heardAt])).to.deep.equal([
        [0, WAITING, 0],
        // The first check (at 1 s) failed once: one failure of two is no verdict, so nothing changes.
        [2010, 'Running(Ok)', 2010],
      ]);
      expect(shown.values[1][1].health).to.equal('healthy');
    });
  });

  // rx~health-unhealthy-fails-and-stops~1
  it('unhealthy after `retries` failures in a row: Failed with the output, checked no more, and so it stays when the container then exits', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot }) => {
      const checker = virtualChecker(['passed', 'failed', 'failed', 'passed'], (ms) => cold(`${ms}ms (x|)`));
      const container$ = new Subject<ExecutionState>();
      const shown = record(withHealth(container$, () => healthChecks(checker, 'id1', check), check, asyncScheduler).pipe(takeUntil(timer(20_000))), scheduler);
      container$.next(ExecutionState.running());
      // The agent stops the unhealthy container; its exit is not what the workload is reported with.
      hot('10s a', { a: 0 }).subscribe(() => container$.next(exitedWith(137)));
      scheduler.flush();
      expect(shown.values.map(([at, s]) => [at, formatState(s)])).to.deep.equal([
        [0, WAITING],
        [1010, 'Running(Ok)'],
        [3010, failedWith('no file')],
      ]);
      expect(checker.checks, 'no check after the verdict').to.equal(3);
      expect(shown.values[2][1].health).to.equal('unhealthy');
    });
  });

  // rx~health-unhealthy-fails-and-stops~1
  it('a container that runs again after it was unhealthy waits for its check again', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold }) => {
      const checker = virtualChecker(['failed', 'failed', 'passed'], (ms) => cold(`${ms}ms (x|)`));
      const running = ExecutionState.running();
      const container$ = cold('a 4s b 99ms c', { a: running, b: exitedWith(137), c: running });
      const shown = record(withHealth(container$, () => healthChecks(checker, 'id1', check), check, asyncScheduler).pipe(takeUntil(timer(20_000))), scheduler);
      scheduler.flush();
      expect(shown.values.map(([at, s]) => [at, formatState(s)])).to.deep.equal([
        [0, WAITING],
        [2010, failedWith('no file')],
        [4101, WAITING],
        [5111, 'Running(Ok)'],
      ]);
    });
  });

  // rx~health-runs-checks-on-interval~1
  it('failures in the start period count for nothing, a check Podman could not run says nothing, and checking ends with the verdict', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold }) => {
      const slow = { ...check, startPeriodMs: 2500 };
      const checker = virtualChecker(['failed', 'failed', 'not-run', 'failed', 'failed'], (ms) => cold(`${ms}ms (x|)`));
      const shown = record(healthChecks(checker, 'id1', slow).pipe(takeUntil(timer(20_000))), scheduler);
      scheduler.flush();
      // Checks at 1, 2 s (in the start period), 3 s (not run: no count at all), 4 and 5 s: the second counting failure is the verdict.
      expect(shown.values).to.deep.equal([
        [1010, { status: 'starting' }],
        [2010, { status: 'starting' }],
        [4010, { status: 'starting' }],
        [5010, { status: 'unhealthy', output: 'no file' }],
      ]);
      expect(shown.done(), 'checking ends with the verdict').to.equal(true);
      expect(checker.checks).to.equal(5);
    });
  });

  // rx~health-runs-checks-on-interval~1
  it('never runs two checks of a container at once: a check longer than the interval skips the ticks it covers', () => {
    let checks = 0;
    testScheduler().run(({ cold }) => {
      const checker = virtualChecker(['passed'], () => cold('2500ms (x|)'));
      const sub = healthChecks(checker, 'id1', check).subscribe();
      cold('10s a').subscribe(() => {
        checks = checker.checks;
        sub.unsubscribe();
      });
    });
    // Ticks each second: a check started at 1 s ends at 3.5 s, the next starts at 4 s and ends at 6.5 s, the next at 7 s.
    expect(checks).to.equal(3);
  });

  // rx~health-starting-until-healthy~1
  it('a container that does not run is shown as it is, and no check runs', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold }) => {
      const checker = virtualChecker(['passed'], (ms) => cold(`${ms}ms (x|)`));
      const shown = record(
        withHealth(of(ExecutionState.starting('Triggered at runtime.')), () => healthChecks(checker, 'id1', check), check, asyncScheduler),
        scheduler,
      );
      scheduler.flush();
      expect(shown.values.map(([, s]) => formatState(s))).to.deep.equal(['Pending(Starting): Triggered at runtime.']);
      expect(checker.checks).to.equal(0);
    });
  });
});
