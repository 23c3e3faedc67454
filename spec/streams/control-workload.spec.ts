import { expect } from 'chai';
import { EMPTY, NEVER, type Observable, map, of, throwError, asyncScheduler } from 'rxjs';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import type { WorkloadState } from '../../lib/messages.js';
import { ConfigurationError } from '../../lib/runtime-connector.js';
import type { RestartPolicy, WorkloadSpec } from '../../lib/workload.js';
import { type WorkloadCommand, createBackoffMs } from '../../lib/workload-loop.js';
import { type ControlDeps, controlWorkload } from '../../streams/control-workload.js';
import { silentLogger } from '../../lib/logger.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { stateOf, workload } from '../../scripts/harness/fixtures.js';
import { record, testScheduler } from '../helpers/virtual-time.js';

const depsFor = (runtime: FakeRuntime): ControlDeps => ({
  runtimes: new Map([['fake', runtime]]),
  scheduler: asyncScheduler,
  prepare: () => of({}),
  release: () => EMPTY,
});
/** `workload: Pending(Starting): info` — easy to compare and to read when a test fails. */
const show = (s: WorkloadState) => `${s.instanceName.workloadName}@${s.instanceName.id.slice(0, 4)}: ${formatState(s.executionState)}`;
const at = (spec: WorkloadSpec, state: ExecutionState) => show(stateOf(spec, state));

const nginx = workload('nginx');
const nginx2 = workload('nginx', { config: 'image: nginx:2' });
const create = (spec: WorkloadSpec = nginx): WorkloadCommand => ({ kind: 'create', spec });
const update = (spec?: WorkloadSpec): WorkloadCommand => ({ kind: 'update', spec });
const del = (spec: WorkloadSpec = nginx): WorkloadCommand => ({ kind: 'delete', instanceName: spec.instanceName });
const boom = () => throwError(() => new Error('boom'));
/** A runtime call that fails the first time (with `message`) and succeeds after. */
const failingOnce = (message = 'boom') => {
  let calls = 0;
  return () => (++calls === 1 ? throwError(() => new Error(message)) : EMPTY);
};

describe('controlWorkload (the WorkloadControlLoop)', () => {
  describe('an update that pulls its image first (pull_ahead)', () => {
    const pulling = (runtime: FakeRuntime): ControlDeps => ({ ...depsFor(runtime), pullAhead: true, jitter: () => 1 });
    const running = ExecutionState.running();
    const timeline = (out: { values: Array<[number, string]> }) => out.values.map(([t, v]) => `${t} ${v}`);

    // rx~pull-ahead~1
    it('keeps the old instance running and watched until the new image is there, then replaces it as the released agent does', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const exit = ExecutionState.failed("Exit code: '1'");
        const runtime = new FakeRuntime({
          states: (id) => (id === 'id-nginx-1' ? cold('-r 50ms x', { r: running, x: exit }) : cold('-r', { r: running })),
          fetchImage: () => cold('100ms |'),
        });
        const spec = { ...nginx, restartPolicy: 'Always' as const };
        const out = record(controlWorkload(cold('a 9ms u', { a: create(spec), u: update(nginx2) }), pulling(runtime)).pipe(map(show)), scheduler);
        flush();
        // The old one is watched during the pull (its exit is reported) but not restarted: its update is coming.
        expect(timeline(out)).to.deep.equal([
          `0 ${at(nginx, ExecutionState.starting('Triggered at runtime.'))}`,
          `1 ${at(nginx, running)}`,
          `11 ${at(nginx, running)}`,
          `62 ${at(nginx, exit)}`,
          `110 ${at(nginx, ExecutionState.stoppingRequested())}`,
          `110 ${at(nginx, ExecutionState.removed())}`,
          `110 ${at(nginx2, ExecutionState.starting('Triggered at runtime.'))}`,
          `111 ${at(nginx2, running)}`,
        ]);
        expect(runtime.calls).to.deep.equal([
          'create nginx',
          'watch id-nginx-1',
          'watch id-nginx-1',
          'fetch nginx nginx:2',
          'delete id-nginx-1',
          'create nginx',
          'watch id-nginx-2',
        ]);
      });
    });

    // rx~pull-ahead~1
    it('a pull that waits for a slot says so on the new instance, the old one running; then the update goes on', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const waiting = 'Waiting for a pull slot: 2 pulls from registry.example are under way';
        const runtime = new FakeRuntime({ states: () => cold('-r', { r: running }), fetchImage: () => cold('w 99ms |', { w: waiting }) });
        const out = record(controlWorkload(cold('a 9ms u', { a: create(nginx), u: update(nginx2) }), pulling(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(timeline(out)).to.deep.equal([
          `0 ${at(nginx, ExecutionState.starting('Triggered at runtime.'))}`,
          `1 ${at(nginx, running)}`,
          `10 ${at(nginx2, ExecutionState.starting(`${waiting} (the old instance runs until the image is pulled)`))}`,
          `11 ${at(nginx, running)}`,
          `110 ${at(nginx, ExecutionState.stoppingRequested())}`,
          `110 ${at(nginx, ExecutionState.removed())}`,
          `110 ${at(nginx2, ExecutionState.starting('Triggered at runtime.'))}`,
          `111 ${at(nginx2, running)}`,
        ]);
      });
    });

    // rx~pull-ahead~1
    it('a pull that fails never stops the old instance: it is tried again after the create back-off, each failure reported on the new instance, and a delete ends the wait at once', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({
          states: () => cold('-r', { r: running }),
          fetchImage: () => cold('10ms #', undefined, new Error('registry unreachable')),
        });
        const logged: string[] = [];
        const log = { ...silentLogger, warn: (text: string) => logged.push(text) };
        const commands = cold('a 9ms u 5000ms d', { a: create(), u: update(nginx2), d: del() });
        const out = record(controlWorkload(commands, { ...pulling(runtime), log }).pipe(map(show)), scheduler);
        flush();
        const failed = (n: number) => at(nginx2, ExecutionState.starting(`Retry ${n}: registry unreachable (the old instance runs until the image is pulled)`));
        expect(timeline(out)).to.deep.equal([
          `0 ${at(nginx, ExecutionState.starting('Triggered at runtime.'))}`,
          `1 ${at(nginx, running)}`,
          `11 ${at(nginx, running)}`,
          `20 ${failed(1)}`,
          `530 ${failed(2)}`,
          `1540 ${failed(3)}`,
          `3550 ${failed(4)}`,
          // The instance given up goes from a server's state as the old one does.
          `5011 ${at(nginx2, ExecutionState.removed())}`,
          `5011 ${at(nginx, ExecutionState.stoppingRequested())}`,
          `5011 ${at(nginx, ExecutionState.removed())}`,
        ]);
        // Tries at 10, 520, 1530 and 3540 (each fails after 10 ms, then 500, 1000, 2000 ms of back-off); the delete ends the wait for the fifth.
        expect(runtime.calls.filter((c) => c.startsWith('fetch'))).to.have.length(4);
        expect(runtime.calls.filter((c) => c.startsWith('create'))).to.deep.equal(['create nginx']);
        expect(logged[0]).to.equal("The update of 'nginx' waits, its old instance running: registry unreachable (try 1; the next after a back-off).");
      });
    });

    // rx~pull-ahead~1
    it('an update that comes while a pull fails gives the waiting instance up (reported Removed) and goes on from the old one', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const nginx3 = workload('nginx', { config: 'image: nginx:3' });
        const runtime = new FakeRuntime({
          states: () => cold('-r', { r: running }),
          fetchImage: (spec) => (spec === nginx2 ? cold('10ms #', undefined, new Error('registry unreachable')) : EMPTY),
        });
        const commands = cold('a 9ms u 99ms v', { a: create(), u: update(nginx2), v: update(nginx3) });
        const out = record(controlWorkload(commands, pulling(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(timeline(out).slice(3)).to.deep.equal([
          `20 ${at(nginx2, ExecutionState.starting('Retry 1: registry unreachable (the old instance runs until the image is pulled)'))}`,
          `110 ${at(nginx2, ExecutionState.removed())}`,
          `110 ${at(nginx, ExecutionState.stoppingRequested())}`,
          `110 ${at(nginx, ExecutionState.removed())}`,
          `110 ${at(nginx3, ExecutionState.starting('Triggered at runtime.'))}`,
          `111 ${at(nginx3, running)}`,
        ]);
      });
    });

    // rx~pull-ahead~1
    it('without pull_ahead the old instance stops at once, as the released agent does', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ states: () => cold('-r', { r: running }), fetchImage: () => cold('100ms |') });
        const out = record(controlWorkload(cold('a 9ms u', { a: create(), u: update(nginx2) }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(timeline(out).slice(2)).to.deep.equal([
          `10 ${at(nginx, ExecutionState.stoppingRequested())}`,
          `10 ${at(nginx, ExecutionState.removed())}`,
          `10 ${at(nginx2, ExecutionState.starting('Triggered at runtime.'))}`,
          `11 ${at(nginx2, running)}`,
        ]);
        expect(runtime.calls.some((c) => c.startsWith('fetch'))).to.equal(false);
      });
    });
  });

  // swdd~agent-workload-control-loop-updates-internal-state~1, swdd~agent-workload-control-loop-executes-create~4, swdd~agent-create-workload~2, swdd~workload-control-loop-receives-workload-states~1, swdd~workload-control-loop-sends-workload-states~2
  it('reports Pending(Starting) "Triggered at runtime.", creates, then reports the states the checker sees', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const runtime = new FakeRuntime({ states: () => cold('--r--s', { r: ExecutionState.running(), s: ExecutionState.succeeded() }) });
      const out$ = controlWorkload(cold('a', { a: create() }), depsFor(runtime));
      expectObservable(out$.pipe(map(show))).toBe('a-b--c', {
        a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
        b: at(nginx, ExecutionState.running()),
        c: at(nginx, ExecutionState.succeeded()),
      });
    });
  });

  describe('restart policies', () => {
    const cases: Array<[RestartPolicy, ExecutionState, boolean]> = [
      ['Always', ExecutionState.succeeded(), true],
      ['Always', ExecutionState.failed("Exit code: '1'"), true],
      ['OnFailure', ExecutionState.failed("Exit code: '1'"), true],
      ['OnFailure', ExecutionState.succeeded(), false],
      ['Never', ExecutionState.failed("Exit code: '1'"), false],
      ['Never', ExecutionState.succeeded(), false],
      ['Always', ExecutionState.lost(), false],
      ['Always', ExecutionState.unknown(), false],
    ];
    for (const [policy, state, restarts] of cases) {
      // swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
      it(`${policy} ${restarts ? 'restarts' : 'does not restart'} on ${formatState(state)}`, () => {
        const scheduler = testScheduler();
        scheduler.run(({ cold, flush }) => {
          const spec = workload('job', { restartPolicy: policy });
          const runtime = new FakeRuntime({ states: (id) => (id === 'id-job-1' ? cold('-x', { x: state }) : NEVER) });
          const out = record(controlWorkload(cold('a', { a: create(spec) }), depsFor(runtime)).pipe(map(show)), scheduler);
          flush();
          const expected = [at(spec, ExecutionState.starting('Triggered at runtime.')), at(spec, state)];
          if (restarts)
            expected.push(
              ...[ExecutionState.stoppingRequested(), ExecutionState.removed(), ExecutionState.starting('Triggered at runtime.')].map((s) => at(spec, s)),
            );
          expect(out.values.map(([, v]) => v)).to.deep.equal(expected);
          expect(runtime.calls).to.deep.equal(
            restarts ? ['create job', 'watch id-job-1', 'delete id-job-1', 'create job', 'watch id-job-2'] : ['create job', 'watch id-job-1'],
          );
        });
      });
    }

    // swdd~workload-control-loop-restarts-workloads-using-update~1, swdd~workload-control-loop-handles-workload-restarts~2
    it('a restart is an update to the stored config and reported as one (Stopping(RequestedAtRuntime), Removed, Pending(Starting)), so a server sees it', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const spec = workload('job', { restartPolicy: 'Always' });
        const runtime = new FakeRuntime({
          states: (id) => (id === 'id-job-1' ? cold('--f', { f: ExecutionState.failed("Exit code: '1'") }) : cold('-r', { r: ExecutionState.running() })),
          delete: () => cold('---|'),
        });
        const out = record(controlWorkload(cold('a', { a: create(spec) }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(out.values).to.deep.equal([
          [0, at(spec, ExecutionState.starting('Triggered at runtime.'))],
          [2, at(spec, ExecutionState.failed("Exit code: '1'"))],
          [2, at(spec, ExecutionState.stoppingRequested())],
          [5, at(spec, ExecutionState.removed())],
          [5, at(spec, ExecutionState.starting('Triggered at runtime.'))],
          [6, at(spec, ExecutionState.running())],
        ]);
        expect(runtime.calls).to.deep.equal(['create job', 'watch id-job-1', 'delete id-job-1', 'create job', 'watch id-job-2']);
      });
    });
  });

  describe('a workload its health checks find unhealthy', () => {
    const unhealthy: ExecutionState = { ...ExecutionState.failed("Health check 'cat /tmp/ok' failed."), health: 'unhealthy' };

    // rx~health-unhealthy-fails-and-stops~1
    it('is stopped by the loop and kept (NEVER): the stop after the report, no delete, no new workload', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ states: () => cold('-r 9ms u', { r: ExecutionState.running(), u: unhealthy }), stop: () => cold('5ms |') });
        const out = record(controlWorkload(cold('a', { a: create() }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(out.values.map(([t, v]) => `${t} ${v}`).slice(-1)).to.deep.equal([`11 ${at(nginx, unhealthy)}`]);
        expect(runtime.calls).to.deep.equal(['create nginx', 'watch id-nginx-1', 'stop id-nginx-1']);
      });
    });

    // rx~health-unhealthy-fails-and-stops~1, swdd~agent-deletes-workload~1
    it('a stop that a delete overtook runs on while the workload is removed, and ends with the loop', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const stop$ = cold<void>('50ms |');
        const runtime = new FakeRuntime({ states: () => cold('-r 9ms u', { r: ExecutionState.running(), u: unhealthy }), stop: () => stop$ });
        const out = record(controlWorkload(cold('a 14ms d', { a: create(), d: del() }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        const [removedAt, last] = out.values.at(-1)!;
        expect(last).to.equal(at(nginx, ExecutionState.removed()));
        expect(stop$.subscriptions.map((s) => [s.subscribedFrame, s.unsubscribedFrame])).to.deep.equal([[11, removedAt]]);
      });
    });

    // rx~health-unhealthy-fails-and-stops~1, swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
    it('with a restart policy, is stopped first and then restarted as an update (its back-off waits with the workload stopped)', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({
          states: (id) => cold(id === 'id-nginx-3' ? '-r' : '-r 9ms u', { r: ExecutionState.running(), u: unhealthy }),
          stop: () => cold('5ms |'),
        });
        const deps: ControlDeps = { ...depsFor(runtime), backoff: { firstDelayMs: 100, maxDelayMs: 100, resetAfterMs: 600_000 } };
        const out = record(controlWorkload(cold('a', { a: create({ ...nginx, restartPolicy: 'OnFailure' }) }), deps).pipe(map(show)), scheduler);
        flush();
        expect(runtime.calls.slice(0, 8)).to.deep.equal([
          'create nginx',
          'watch id-nginx-1',
          'stop id-nginx-1',
          'delete id-nginx-1',
          'create nginx',
          'watch id-nginx-2',
          'stop id-nginx-2',
          'delete id-nginx-2',
        ]);
        // The first restart comes once it is stopped (16 ms); the second, a short run again, 100 ms of back-off after its stop (32 ms).
        const restarts = out.values.filter(([, v]) => v.endsWith('Stopping(RequestedAtRuntime)')).map(([t]) => t);
        expect(restarts).to.deep.equal([16, 32 + 100]);
      });
    });
  });

  describe('crash-loop back-off', () => {
    const job = workload('job', { restartPolicy: 'Always' });
    const failed = ExecutionState.failed("Exit code: '1'");
    /** A runtime whose every workload fails `runMs` after it was created; the times of its creates are kept. */
    const crashing = (
      scheduler: ReturnType<typeof testScheduler>,
      cold: (m: string, v?: Record<string, ExecutionState>) => Observable<ExecutionState>,
      runMs: (n: number) => number,
    ) => {
      const created: number[] = [];
      const runtime = new FakeRuntime({
        create: (spec, attempt) => {
          created.push(scheduler.now());
          return of(`id-${spec.instanceName.workloadName}-${attempt}`);
        },
        states: (id) => cold(`${runMs(Number(id.split('-').at(-1)))}ms f`, { f: failed }),
      });
      return { runtime, created };
    };
    const gapsInSeconds = (times: number[]) => times.slice(1).map((t, i) => Math.floor((t - times[i]) / 1000));

    it("restarts at once after the first exit, then waits 10 s, doubling up to 5 min (kubelet's schedule)", () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const { runtime, created } = crashing(scheduler, cold, () => 1);
        controlWorkload(cold('a 1300000ms d', { a: create(job), d: del(job) }), depsFor(runtime)).subscribe();
        flush();
        expect(gapsInSeconds(created)).to.deep.equal([0, 10, 20, 40, 80, 160, 300, 300, 300]);
      });
    });

    // rx~crash-loop-backoff-state~1
    it('says while it waits which restart comes, when, and how the last run ended', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const { runtime } = crashing(scheduler, cold, () => 1);
        const out = record(controlWorkload(cold('a 15000ms d', { a: create(job), d: del(job) }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        const waiting = at(
          job,
          ExecutionState.waitingToStart("Restart 2 of a workload that keeps exiting (last: Exit code: '1'), in 10 s (crash-loop back-off)."),
        );
        expect(out.values.filter(([, v]) => v === waiting).map(([t]) => t)).to.deep.equal([2]);
      });
    });

    // rx~crash-loop-backoff~1
    it('a run of 10 minutes resets it: the next restart is at once again', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        // Runs 3 and 4 last 11 minutes; the others 1 ms.
        const { runtime, created } = crashing(scheduler, cold, (n) => (n === 3 || n === 4 ? 660_000 : 1));
        controlWorkload(cold('a 2000000ms d', { a: create(job), d: del(job) }), depsFor(runtime)).subscribe();
        flush();
        // After each long run the restart is at once (the gap is the run itself); the short run after them waits 10 s, not 20 s.
        expect(gapsInSeconds(created).slice(0, 5)).to.deep.equal([0, 10, 660, 660, 10]);
      });
    });

    // rx~crash-loop-backoff-ends-on-command~1
    it('an update or a delete ends the wait at once', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const { runtime, created } = crashing(scheduler, cold, (n) => (n <= 2 ? 1 : 3_600_000));
        const job2 = workload('job', { restartPolicy: 'Always', config: 'image: job:2' });
        controlWorkload(cold('a 4999ms u 9999ms d', { a: create(job), u: update(job2), d: del(job2) }), depsFor(runtime)).subscribe();
        flush();
        // Created at 0 and 1 (the restart at once); the update at 5 000 creates at once, not at 10 002.
        expect(created).to.deep.equal([0, 1, 5000]);
        expect(runtime.calls.filter((c) => c.startsWith('delete'))).to.deep.equal(['delete id-job-1', 'delete id-job-2', 'delete id-job-3']);
      });
    });

    // rx~crash-loop-backoff-ends-on-command~1
    it('a delete during the wait ends it at once: the workload is removed then and never created again', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const { runtime, created } = crashing(scheduler, cold, () => 1);
        // Created at 0, restarted at once at 1, exits at 2: the next restart would be at 10 002. The delete comes at 5 000.
        const out = record(controlWorkload(cold('a 4999ms d', { a: create(job), d: del(job) }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(created).to.deep.equal([0, 1]);
        expect(runtime.calls.filter((c) => c.startsWith('delete'))).to.deep.equal(['delete id-job-1', 'delete id-job-2']);
        // Removed at 1 is the restart at once (reported as an update), at 5 000 the delete.
        expect(out.values.filter(([, v]) => v === at(job, ExecutionState.removed())).map(([t]) => t)).to.deep.equal([1, 5000]);
      });
    });

    // rx~crash-loop-backoff-config~1
    it('with a first delay of 0, restarts at once, always (the released agent)', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const { runtime, created } = crashing(scheduler, cold, () => 1);
        const deps = { ...depsFor(runtime), backoff: { firstDelayMs: 0, maxDelayMs: 300_000, resetAfterMs: 600_000 } };
        controlWorkload(cold('a 9ms d', { a: create(job), d: del(job) }), deps).subscribe();
        flush();
        expect(gapsInSeconds(created)).to.deep.equal(Array(created.length - 1).fill(0));
        expect(created.length).to.be.greaterThan(5);
      });
    });
  });

  describe('restarts in place (1.x)', () => {
    it('ALWAYS after Succeeded starts the same workload again where the runtime can, reporting Pending(Starting), and watches it again', () => {
      testScheduler().run(({ cold, expectObservable, flush }) => {
        const spec = workload('job', { restartPolicy: 'Always' });
        let watches = 0;
        const runtime = new FakeRuntime({
          states: () => (++watches === 1 ? cold('--s', { s: ExecutionState.succeeded() }) : cold('-r', { r: ExecutionState.running() })),
          startAgain: () => cold('----|'),
        });
        expectObservable(controlWorkload(cold('a', { a: create(spec) }), depsFor(runtime)).pipe(map(show))).toBe('a-(bc)-d', {
          a: at(spec, ExecutionState.starting('Triggered at runtime.')),
          b: at(spec, ExecutionState.succeeded()),
          c: at(spec, ExecutionState.starting('Triggered at runtime.')),
          d: at(spec, ExecutionState.running()),
        });
        flush();
        expect(runtime.calls).to.deep.equal(['create job', 'watch id-job-1', 'start id-job-1', 'watch id-job-1']);
      });
    });

    it('a failed start in place falls back to a new workload; a failure is never started in place', () => {
      testScheduler().run(({ cold, flush }) => {
        const spec = workload('job', { restartPolicy: 'Always' });
        const failing = new FakeRuntime({
          states: (id) => (id === 'id-job-1' ? cold('-f', { f: ExecutionState.failed("Exit code: '1'") }) : NEVER),
          startAgain: () => cold('-#'),
        });
        controlWorkload(cold('a', { a: create(spec) }), depsFor(failing)).subscribe();
        const refusing = new FakeRuntime({
          states: (id) => (id === 'id-job-1' ? cold('-s', { s: ExecutionState.succeeded() }) : NEVER),
          startAgain: () => cold('-#'),
        });
        controlWorkload(cold('a', { a: create(spec) }), depsFor(refusing)).subscribe();
        flush();
        expect(failing.calls).to.deep.equal(['create job', 'watch id-job-1', 'delete id-job-1', 'create job', 'watch id-job-2']);
        expect(refusing.calls).to.deep.equal(['create job', 'watch id-job-1', 'start id-job-1', 'delete id-job-1', 'create job', 'watch id-job-2']);
      });
    });
  });

  describe('a kept workload of an earlier run', () => {
    const kept = (spec: WorkloadSpec) => ({ instanceName: spec.instanceName, runtime: 'fake', id: 'old', state: ExecutionState.succeeded() });

    it('is left alone until its create, then started again in place: Pending(Starting), its states; no delete, no new workload', () => {
      testScheduler().run(({ cold, expectObservable, flush }) => {
        const runtime = new FakeRuntime({ states: () => cold('-r', { r: ExecutionState.running() }), startAgain: () => cold('-|') });
        const out$ = controlWorkload(cold('a 4ms c', { a: { kind: 'adopt', existing: kept(nginx) }, c: create() }), depsFor(runtime));
        expectObservable(out$.pipe(map(show))).toBe('5ms a 1ms b', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.running()),
        });
        flush();
        expect(runtime.calls).to.deep.equal(['start old', 'watch old']);
      });
    });

    it('is deleted when the create is of another config, or when a delete comes first; when it cannot start, a new one is created', () => {
      testScheduler().run(({ cold, flush }) => {
        const changed = new FakeRuntime();
        controlWorkload(cold('ac', { a: { kind: 'adopt', existing: kept(nginx) }, c: create(nginx2) }), depsFor(changed)).subscribe();
        const deleted = new FakeRuntime();
        const deletes: string[] = [];
        controlWorkload(cold('ad', { a: { kind: 'adopt', existing: kept(nginx) }, d: del() }), depsFor(deleted))
          .pipe(map(show))
          .subscribe((s) => deletes.push(s));
        const broken = new FakeRuntime({ startAgain: () => cold('-#') });
        controlWorkload(cold('ac', { a: { kind: 'adopt', existing: kept(nginx) }, c: create() }), depsFor(broken)).subscribe();
        flush();
        expect(changed.calls).to.deep.equal(['delete old', 'create nginx', 'watch id-nginx-1']);
        expect(deleted.calls).to.deep.equal(['delete old']);
        expect(deletes).to.deep.equal([at(nginx, ExecutionState.stoppingRequested()), at(nginx, ExecutionState.removed())]);
        expect(broken.calls).to.deep.equal(['start old', 'delete old', 'create nginx', 'watch id-nginx-1']);
      });
    });
  });

  describe('a delete that fails', () => {
    // swdd~agent-workload-control-loop-executes-delete~3
    it('is reported once as Stopping(DeleteFailed); the loop watches nothing and waits for the next command, which may delete it', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ states: () => cold('r', { r: ExecutionState.running() }), delete: failingOnce() });
        const out = record(controlWorkload(cold('a 9ms d 4999ms e', { a: create(), d: del(), e: del() }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(out.values.map(([t, v]) => [t, v.replace(/^nginx@\w+: /, '')])).to.deep.equal([
          [0, 'Pending(Starting): Triggered at runtime.'],
          [0, 'Running(Ok)'],
          [10, 'Stopping(RequestedAtRuntime)'],
          [10, 'Stopping(DeleteFailed): boom'],
          [5010, 'Stopping(RequestedAtRuntime)'],
          [5010, 'Removed'],
        ]);
        expect(out.done()).to.equal(true);
        expect(runtime.calls.filter((c) => c.startsWith('watch'))).to.have.length(1);
      });
    });

    it('is not tried again by itself; an update that comes deletes and creates', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ states: () => NEVER, delete: failingOnce() });
        controlWorkload(cold('a 9ms d 9999ms u', { a: create(), d: del(), u: update(nginx2) }), depsFor(runtime)).subscribe();
        flush();
        expect(runtime.calls.filter((c) => c.startsWith('delete') || c.startsWith('create'))).to.deep.equal([
          'create nginx',
          'delete id-nginx-1',
          'delete id-nginx-1',
          'create nginx',
        ]);
      });
    });

    // swdd~agent-workload-control-loop-executes-update~3
    it('a delete of a workload that has no runtime id (its create failed) still says Stopping(RequestedAtRuntime) first', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({ create: boom });
        expectObservable(controlWorkload(cold('a 99ms d', { a: create(), d: del() }), depsFor(runtime)).pipe(map(show))).toBe('(ab) 96ms (cd|)', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.starting('Retry 1: boom')),
          c: at(nginx, ExecutionState.stoppingRequested()),
          d: at(nginx, ExecutionState.removed()),
        });
      });
    });
  });

  describe('retries of a failing create', () => {
    // swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1, swdd~agent-workload-control-loop-exponential-backoff-retries~1, swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1, swdd~agent-workload-control-loop-handles-failed-workload-creation~1
    it('retries without limit, waiting 0.5 s doubled each time up to 5 minutes, reporting Pending(Starting) "Retry <n>: <cause>"', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ create: boom });
        // An hour of retries, then a delete ends them.
        const out = record(controlWorkload(cold('a 3599999ms d', { a: create(), d: del() }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        const expected: Array<[number, string]> = [[0, at(nginx, ExecutionState.starting('Triggered at runtime.'))]];
        let t = 0;
        for (let retry = 1; t < 3600_000; retry++) {
          expected.push([t, at(nginx, ExecutionState.starting(`Retry ${retry}: boom`))]);
          t += Math.min(500 * 2 ** (retry - 1), 300_000);
        }
        expect(out.values.filter(([time]) => time < 3600_000)).to.deep.equal(expected);
        expect(out.values.map(([, v]) => v).join()).to.not.include('StartingFailed');
      });
    });

    // swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2, swdd~workload-control-loop-receives-workload-states~1
    it('a new command cancels what follows the last one: the wait for a retry, and the watch of a created workload', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        // The first create fails: its retry would come at 501; the update at 100 cancels it.
        const failing = cold<string>('-#');
        const watched = cold<ExecutionState>('-r', { r: ExecutionState.running() });
        const runtime = new FakeRuntime({ create: (_spec, attempt) => (attempt === 1 ? failing : of(`id-${attempt}`)), states: () => watched });
        const out$ = controlWorkload(cold('a 99ms u 899ms d', { a: create(), u: update(nginx2), d: del(nginx2) }), depsFor(runtime));
        const out = record(out$.pipe(map((s) => formatState(s.executionState))), scheduler);
        flush();
        expect(out.values).to.deep.equal([
          [0, 'Pending(Starting): Triggered at runtime.'],
          [1, 'Pending(Starting): Retry 1: error'],
          [100, 'Stopping(RequestedAtRuntime)'],
          [100, 'Removed'],
          [100, 'Pending(Starting): Triggered at runtime.'],
          [101, 'Running(Ok)'],
          [1000, 'Stopping(RequestedAtRuntime)'],
          [1000, 'Removed'],
        ]);
        // One create attempt of the first config (no retry after the update); the new one is watched until the delete.
        const frames = (logs: typeof failing.subscriptions) => logs.map((l) => [l.subscribedFrame, l.unsubscribedFrame]);
        expect(frames(failing.subscriptions)).to.deep.equal([[0, 1]]);
        expect(frames(watched.subscriptions)).to.deep.equal([[100, 1000]]);
      });
    });

    // swdd~workload-control-loop-receives-workload-states~1
    it('a command that leaves the state as it was (an old workload of a runtime the agent lacks) goes on watching after it', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ states: () => cold('-r 99ms x', { r: ExecutionState.running(), x: ExecutionState.failed("Exit code: '1'") }) });
        const old = { instanceName: workload('old').instanceName, runtime: 'gone', id: 'x', state: ExecutionState.succeeded() };
        const commands = cold<WorkloadCommand>('a 49ms e', { a: create(), e: { kind: 'removeExisting', existing: old, final: false } });
        const out = record(controlWorkload(commands, depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(out.values.map(([t, v]) => `${t} ${v}`)).to.deep.equal([
          `0 ${at(nginx, ExecutionState.starting('Triggered at runtime.'))}`,
          `1 ${at(nginx, ExecutionState.running())}`,
          `50 ${show(stateOf(workload('old'), ExecutionState.stoppingRequested()))}`,
          `50 ${show(stateOf(workload('old'), ExecutionState.deleteFailed("Unknown runtime 'gone'")))}`,
          // The watch begins again after the command, as after any command: the state, then the exit.
          `51 ${at(nginx, ExecutionState.running())}`,
          `151 ${at(nginx, ExecutionState.failed("Exit code: '1'"))}`,
        ]);
      });
    });

    // swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1
    it('the wait is a random share of the backoff (full jitter)', () => {
      expect(createBackoffMs(0, 1)).to.equal(500);
      expect(createBackoffMs(3, 0.5)).to.equal(2000);
      expect(createBackoffMs(3, 0)).to.equal(0);
      expect(createBackoffMs(20, 1)).to.equal(300_000);
      expect(createBackoffMs(10_000, 1)).to.equal(300_000);
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({
          create: (_spec, attempt) => (attempt < 2 ? boom() : of('the-id')),
          states: (id) => (id === 'the-id' ? cold('r', { r: ExecutionState.running() }) : NEVER),
        });
        const deps = { ...depsFor(runtime), jitter: () => 0.25 };
        expectObservable(controlWorkload(cold('a', { a: create() }), deps).pipe(map(show))).toBe('(ab) 121ms c', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.starting('Retry 1: boom')),
          c: at(nginx, ExecutionState.running()),
        });
      });
    });

    it('a create that can never succeed as configured (ConfigurationError) is not retried: Pending(StartingFailed) with the reason', () => {
      const runtime = new FakeRuntime({ create: () => throwError(() => new ConfigurationError("The runtime config field 'image' is missing.")) });
      testScheduler().run(({ cold, expectObservable }) => {
        expectObservable(controlWorkload(cold('a', { a: create() }), depsFor(runtime)).pipe(map(show))).toBe('(ab)', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.startingFailed("The runtime config field 'image' is missing.")),
        });
      });
      expect(runtime.calls).to.deep.equal(['create nginx']);
    });

    // swdd~agent-workload-control-loop-executes-retry~1
    it('a retry that succeeds stores the new id and watches its state', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({
          create: (_spec, attempt) => (attempt < 3 ? boom() : of('the-id')),
          states: (id) => (id === 'the-id' ? cold('r', { r: ExecutionState.running() }) : NEVER),
        });
        expectObservable(controlWorkload(cold('a', { a: create() }), depsFor(runtime)).pipe(map(show))).toBe('(ab) 496ms c 999ms d', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.starting('Retry 1: boom')),
          c: at(nginx, ExecutionState.starting('Retry 2: boom')),
          d: at(nginx, ExecutionState.running()),
        });
      });
    });

    // swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2, swdd~agent-workload-control-loop-reset-backoff-on-update~1, swdd~agent-workload-control-loop-update-create-failed-allows-retry~1
    it('an update stops the retries of the old config and starts counting anew', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ create: boom });
        const out = record(
          controlWorkload(cold('a 2499ms b 2499ms c', { a: create(), b: update(nginx2), c: del(nginx2) }), depsFor(runtime)).pipe(map(show)),
          scheduler,
        );
        flush();
        const old = out.values.filter(([, v]) => v.startsWith(show(stateOf(nginx, ExecutionState.removed())).split(':')[0]));
        expect(old.map(([t]) => t)).to.deep.equal([0, 0, 500, 1500, 2500, 2500], 'no retry of the old config after the update');
        expect(old.slice(-2).map(([, v]) => v)).to.deep.equal([at(nginx, ExecutionState.stoppingRequested()), at(nginx, ExecutionState.removed())]);
        const fresh = out.values.filter(([, v]) => v.startsWith(at(nginx2, ExecutionState.removed()).split(':')[0]));
        expect(fresh.slice(0, 3)).to.deep.equal([
          [2500, at(nginx2, ExecutionState.starting('Triggered at runtime.'))],
          [2500, at(nginx2, ExecutionState.starting('Retry 1: boom'))],
          [3000, at(nginx2, ExecutionState.starting('Retry 2: boom'))],
        ]);
      });
    });

    // swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2
    it('a delete stops the retries', () => {
      const scheduler = testScheduler();
      scheduler.run(({ cold, flush }) => {
        const runtime = new FakeRuntime({ create: boom });
        const out = record(controlWorkload(cold('a 1499ms b', { a: create(), b: del() }), depsFor(runtime)).pipe(map(show)), scheduler);
        flush();
        expect(out.values.at(-1)).to.deep.equal([1500, at(nginx, ExecutionState.removed())]);
        expect(runtime.calls.filter((c) => c.startsWith('create'))).to.have.length(2);
        expect(out.done()).to.equal(true);
      });
    });
  });

  describe('delete', () => {
    // swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-workload-obj-delete-command~1
    it('reports Stopping(RequestedAtRuntime), deletes, reports Removed and ends', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({ states: () => cold('r', { r: ExecutionState.running() }), delete: () => cold('---|') });
        expectObservable(controlWorkload(cold('a 9ms b', { a: create(), b: del() }), depsFor(runtime)).pipe(map(show))).toBe('(ab) 6ms c--(d|)', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.running()),
          c: at(nginx, ExecutionState.stoppingRequested()),
          d: at(nginx, ExecutionState.removed()),
        });
      });
    });

    // swdd~agent-workload-control-loop-delete-failed-allows-retry~1
    it('a failed delete reports Stopping(DeleteFailed) and the next delete is tried', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({ delete: failingOnce('busy') });
        expectObservable(controlWorkload(cold('a-b----c', { a: create(), b: { kind: 'update' }, c: del() }), depsFor(runtime)).pipe(map(show))).toBe(
          'a-(bc)-(de|)',
          {
            a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
            b: at(nginx, ExecutionState.stoppingRequested()),
            c: at(nginx, ExecutionState.deleteFailed('busy')),
            d: at(nginx, ExecutionState.stoppingRequested()),
            e: at(nginx, ExecutionState.removed()),
          },
        );
      });
    });

    // swdd~agent-workload-control-loop-delete-failed-allows-retry~1
    it('a host side that cannot be released is a failed delete too: reported, kept, and tried again by the next delete', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({ create: boom });
        const deps = { ...depsFor(runtime), release: failingOnce('folder busy') };
        expectObservable(controlWorkload(cold('a 9ms b 9ms c', { a: create(), b: del(), c: del() }), deps).pipe(map(show))).toBe('(ab) 6ms (cd) 6ms (ef|)', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.starting('Retry 1: boom')),
          c: at(nginx, ExecutionState.stoppingRequested()),
          d: at(nginx, ExecutionState.deleteFailed('folder busy')),
          e: at(nginx, ExecutionState.stoppingRequested()),
          f: at(nginx, ExecutionState.removed()),
        });
      });
    });
    // swdd~agent-workload-control-loop-delete-broken-allowed~1
    it('a delete with nothing on the runtime ends the loop, reporting Removed', () => {
      const runtime = new FakeRuntime();
      testScheduler().run(({ cold, expectObservable }) => {
        expectObservable(controlWorkload(cold('a', { a: del() }), depsFor(runtime)).pipe(map(show))).toBe('(a|)', {
          a: at(nginx, ExecutionState.removed()),
        });
      });
      expect(runtime.calls).to.deep.equal([]);
    });
  });

  describe('update', () => {
    // swdd~agent-workload-control-loop-executes-update~3, swdd~agent-workload-obj-update-command~2
    it('deletes the old config (Stopping, Removed) and creates the new one', () => {
      let runtime!: FakeRuntime;
      testScheduler().run(({ cold, expectObservable }) => {
        runtime = new FakeRuntime({ delete: () => cold('--|') });
        expectObservable(controlWorkload(cold('a-b', { a: create(), b: update(nginx2) }), depsFor(runtime)).pipe(map(show))).toBe('a-b-(cd)', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.stoppingRequested()),
          c: at(nginx, ExecutionState.removed()),
          d: at(nginx2, ExecutionState.starting('Triggered at runtime.')),
        });
      });
      expect(runtime.calls).to.deep.equal(['create nginx', 'watch id-nginx-1', 'delete id-nginx-1', 'create nginx', 'watch id-nginx-2']);
    });

    // swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1
    it('no create while the old workload could not be deleted; a later update tries again', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({ delete: failingOnce('busy') });
        expectObservable(controlWorkload(cold('a-b----c', { a: create(), b: update(nginx2), c: update(nginx2) }), depsFor(runtime)).pipe(map(show))).toBe(
          'a-(bc)-(def)',
          {
            a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
            b: at(nginx, ExecutionState.stoppingRequested()),
            c: at(nginx, ExecutionState.deleteFailed('busy')),
            d: at(nginx, ExecutionState.stoppingRequested()),
            e: at(nginx, ExecutionState.removed()),
            f: at(nginx2, ExecutionState.starting('Triggered at runtime.')),
          },
        );
      });
    });

    // swdd~agent-workload-control-loop-update-broken-allowed~1
    it('with no old workload on the runtime the update goes on with the create', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime();
        expectObservable(controlWorkload(cold('a', { a: update(nginx2) }), depsFor(runtime)).pipe(map(show))).toBe('a', {
          a: at(nginx2, ExecutionState.starting('Triggered at runtime.')),
        });
      });
    });

    // swdd~agent-workload-control-loop-executes-update-delete-only~1
    it('an update without a new workload only deletes; the create comes later', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime();
        expectObservable(controlWorkload(cold('a-b----c', { a: create(), b: update(), c: create(nginx2) }), depsFor(runtime)).pipe(map(show))).toBe(
          'a-(bc)-d',
          {
            a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
            b: at(nginx, ExecutionState.stoppingRequested()),
            c: at(nginx, ExecutionState.removed()),
            d: at(nginx2, ExecutionState.starting('Triggered at runtime.')),
          },
        );
      });
    });

    // swdd~workload-control-loop-checks-workload-state-validity~1
    it('states of the old instance arriving after an update are not reported', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({
          states: (id) => (id === 'id-nginx-1' ? cold('----r', { r: ExecutionState.running() }) : NEVER),
        });
        expectObservable(controlWorkload(cold('a-b', { a: create(), b: update(nginx2) }), depsFor(runtime)).pipe(map(show))).toBe('a-(bcd)', {
          a: at(nginx, ExecutionState.starting('Triggered at runtime.')),
          b: at(nginx, ExecutionState.stoppingRequested()),
          c: at(nginx, ExecutionState.removed()),
          d: at(nginx2, ExecutionState.starting('Triggered at runtime.')),
        });
      });
    });
  });

  describe('resume and existing workloads', () => {
    // swdd~agent-workload-control-loop-executes-resume~1, swdd~agent-resume-workload~2
    it('asks the runtime for the id, watches its state and creates nothing', () => {
      let runtime!: FakeRuntime;
      testScheduler().run(({ cold, expectObservable }) => {
        runtime = new FakeRuntime({ states: () => cold('-r', { r: ExecutionState.running() }) });
        expectObservable(controlWorkload(cold('a', { a: { kind: 'resume', spec: nginx } }), depsFor(runtime)).pipe(map(show))).toBe('-a', {
          a: at(nginx, ExecutionState.running()),
        });
      });
      expect(runtime.calls).to.deep.equal(['id nginx', 'watch id-nginx-existing']);
    });

    // swdd~agent-workload-control-loop-executes-resume~1
    it('a workload to resume that is gone is reported Failed(Lost)', () => {
      testScheduler().run(({ cold, expectObservable }) => {
        const runtime = new FakeRuntime({ workloadId: () => of(undefined) });
        expectObservable(controlWorkload(cold('a', { a: { kind: 'resume', spec: nginx } }), depsFor(runtime)).pipe(map(show))).toBe('a', {
          a: at(nginx, ExecutionState.lost('The workload to resume was not found.')),
        });
      });
    });

    // swdd~agent-delete-old-workload~3
    it('a workload of an earlier run is deleted by id with Stopping(RequestedAtRuntime) then Removed', () => {
      let runtime!: FakeRuntime;
      testScheduler().run(({ cold, expectObservable }) => {
        runtime = new FakeRuntime({ delete: () => cold('-|') });
        const existing = { instanceName: nginx.instanceName, runtime: 'fake', id: 'old-id', state: ExecutionState.succeeded() };
        expectObservable(controlWorkload(cold('a', { a: { kind: 'removeExisting', existing, final: true } }), depsFor(runtime)).pipe(map(show))).toBe('a(b|)', {
          a: at(nginx, ExecutionState.stoppingRequested()),
          b: at(nginx, ExecutionState.removed()),
        });
      });
      expect(runtime.calls).to.deep.equal(['delete old-id']);
    });
  });
});
