import { expect } from 'chai';
import { EMPTY, NEVER, type Observable, map, of, asyncScheduler } from 'rxjs';
import type { TestScheduler } from 'rxjs/testing';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import type { FromServer, WorkloadState } from '../../lib/messages.js';
import { runWorkloads } from '../../streams/run-workloads.js';
import { type FakeBehaviour, FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { AGENT, deleted, stateOf, workload } from '../../scripts/harness/fixtures.js';
import { testScheduler } from '../helpers/virtual-time.js';

const S = ExecutionState;
const show = (s: WorkloadState) => `${s.instanceName.workloadName}: ${formatState(s.executionState)}`;

/** Runs the core on `messages` and returns `[time, "workload: State"]` for every state it reports. */
function run(scheduler: TestScheduler, messages$: Observable<FromServer>, behaviour: FakeBehaviour) {
  const runtime = new FakeRuntime(behaviour);
  const out: Array<[number, string]> = [];
  runWorkloads(messages$, {
    agentName: AGENT,
    runtimes: new Map([['fake', runtime]]),
    scheduler: asyncScheduler,
    prepare: () => of({}),
    release: () => EMPTY,
  })
    .pipe(map((states) => states.map(show)))
    .subscribe((states) => states.forEach((s) => out.push([scheduler.now(), s])));
  return { out, runtime };
}

// The dependency example of the Ankaios dependencies guide (examples/dependencies.yaml), on one agent.
const init = workload('init_storage');
const storage = workload('storage_provider', { dependencies: { init_storage: 'Succeeded' } });
const logger = workload('logger', { dependencies: { storage_provider: 'Running' } });
const errorHandler = workload('error_handler', { dependencies: { storage_provider: 'Failed' } });

describe('runWorkloads (the workload core)', () => {
  // swdd~agent-handles-workloads-with-fulfilled-dependencies~1, swdd~agent-handles-new-workload-operations~1, swdd~agent-enqueues-unfulfilled-create~1, swdd~agent-executes-create-workload-operation~1, swdd~agent-manager-receives-workload-states-of-its-workloads~1, swdd~agent-uses-async-channels~1
  it('the dependency example starts in the order its dependencies demand', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const states: Record<string, Observable<ExecutionState>> = {
        'id-init_storage-1': cold('r-s', { r: S.running(), s: S.succeeded() }),
        'id-storage_provider-1': cold('r----f', { r: S.running(), f: S.failed("Exit code: '1'") }),
        'id-logger-1': cold('r', { r: S.running() }),
        'id-error_handler-1': cold('-s', { s: S.succeeded() }),
      };
      const { out } = run(scheduler, cold('a', { a: { kind: 'serverHello', added: [logger, storage, init, errorHandler] } }), {
        states: (id) => states[id] ?? NEVER,
      });
      flush();
      expect(out).to.deep.equal([
        [0, 'logger: Pending(WaitingToStart)'],
        [0, 'storage_provider: Pending(WaitingToStart)'],
        [0, 'error_handler: Pending(WaitingToStart)'],
        [0, 'init_storage: Pending(Starting): Triggered at runtime.'],
        [0, 'init_storage: Running(Ok)'],
        [2, 'init_storage: Succeeded(Ok)'],
        [2, 'storage_provider: Pending(Starting): Triggered at runtime.'],
        [2, 'storage_provider: Running(Ok)'],
        [2, 'logger: Pending(Starting): Triggered at runtime.'],
        [2, 'logger: Running(Ok)'],
        [7, "storage_provider: Failed(ExecFailed): Exit code: '1'"],
        [7, 'error_handler: Pending(Starting): Triggered at runtime.'],
        [8, 'error_handler: Succeeded(Ok)'],
      ]);
    });
  });

  // swdd~agent-handles-update-workload-state-requests~1, swdd~agent-manager-stores-all-workload-states~1
  it("a dependency on another agent's workload is released by the server's UpdateWorkloadState", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const db = workload('db', { agent: 'agent_B' });
      const app = workload('app', { dependencies: { db: 'Running' } });
      const { out, runtime } = run(
        scheduler,
        cold('a--b', {
          a: { kind: 'serverHello', added: [app] },
          b: { kind: 'updateWorkloadState', states: [stateOf(db, S.running())] },
        }),
        {},
      );
      flush();
      expect(out).to.deep.equal([
        [0, 'app: Pending(WaitingToStart)'],
        [3, 'app: Pending(Starting): Triggered at runtime.'],
      ]);
      expect(runtime.calls).to.include('create app');
    });
  });

  // swdd~agent-manager-stores-all-workload-states~1, swdd~agent-handles-update-workload-state-requests~1
  it("a workload added later starts at once on another agent's state heard before it came; after that state's removal it waits", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const db = workload('db', { agent: 'agent_B' });
      const app = workload('app', { dependencies: { db: 'Running' } });
      const late = workload('late', { config: 'image: late:2', dependencies: { db: 'Running' } });
      const { out } = run(
        scheduler,
        cold('a-b-c-d-e', {
          a: { kind: 'serverHello', added: [] },
          b: { kind: 'updateWorkloadState', states: [stateOf(db, S.running())] },
          c: { kind: 'updateWorkload', added: [app], deleted: [] },
          d: { kind: 'updateWorkloadState', states: [stateOf(db, S.removed())] },
          e: { kind: 'updateWorkload', added: [late], deleted: [] },
        }),
        {},
      );
      flush();
      expect(out).to.deep.equal([
        [4, 'app: Pending(Starting): Triggered at runtime.'],
        [8, 'late: Pending(WaitingToStart)'],
      ]);
    });
  });

  // swdd~agent-enqueues-unfulfilled-delete~1, swdd~agent-manager-hysteresis_on-workload-states-of-its-workloads~1, swdd~agent-handles-update-workload-requests~1, swdd~agent-executes-delete-workload-operation~1
  it('a dependency waits to be deleted until its dependent is gone, and stays Stopping(WaitingToStop) while it keeps running', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const db = workload('db');
      const app = workload('app', { dependencies: { db: 'Running' } });
      const { out } = run(
        scheduler,
        cold('a-b---c', {
          a: { kind: 'serverHello', added: [db, app] },
          b: { kind: 'updateWorkload', added: [], deleted: [deleted(db, { app: 'NotPendingNorRunning' })] },
          c: { kind: 'updateWorkload', added: [], deleted: [deleted(app)] },
        }),
        {
          states: (id) => (id === 'id-db-1' ? cold('r---x', { r: S.running(), x: S.failed("Exit code: '3'") }) : cold('r', { r: S.running() })),
          delete: () => cold('-|'),
        },
      );
      flush();
      expect(out.filter(([, s]) => s.startsWith('db'))).to.deep.equal([
        [0, 'db: Pending(Starting): Triggered at runtime.'],
        [0, 'db: Running(Ok)'],
        [2, 'db: Stopping(WaitingToStop)'],
        // the container fails at 4: hysteresis keeps Stopping(WaitingToStop)
        // app's Stopping(RequestedAtRuntime) at 6 already meets DEL_COND_NOT_PENDING_NOR_RUNNING
        [6, 'db: Stopping(RequestedAtRuntime)'],
        [7, 'db: Removed'],
      ]);
      expect(out.filter(([, s]) => s.startsWith('app')).slice(-2)).to.deep.equal([
        [6, 'app: Stopping(RequestedAtRuntime)'],
        [7, 'app: Removed'],
      ]);
    });
  });

  // swdd~agent-executes-update-delete-only-workload-operation~1, swdd~agent-handles-update-with-fulfilled-delete~1
  it('an update whose new config must wait deletes the old workload now and creates the new one later', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const db = workload('db', { agent: 'agent_B' });
      const v1 = workload('app');
      const v2 = workload('app', { config: 'image: app:2', dependencies: { db: 'Running' } });
      const { out, runtime } = run(
        scheduler,
        cold('a-b--c', {
          a: { kind: 'serverHello', added: [v1] },
          b: { kind: 'updateWorkload', added: [v2], deleted: [deleted(v1)] },
          c: { kind: 'updateWorkloadState', states: [stateOf(db, S.running())] },
        }),
        {},
      );
      flush();
      expect(out.filter(([t]) => t > 0)).to.deep.equal([
        [2, 'app: Pending(WaitingToStart)'],
        [2, 'app: Stopping(RequestedAtRuntime)'],
        [2, 'app: Removed'],
        [5, 'app: Pending(Starting): Triggered at runtime.'],
      ]);
      expect(runtime.calls).to.deep.equal(['list', 'create app', 'watch id-app-1', 'delete id-app-1', 'create app', 'watch id-app-2']);
    });
  });

  // swdd~agent-initial-list-existing-workloads~1, swdd~agent-existing-workloads-finds-list~1, swdd~agent-facade-forwards-list-reusable-workloads-call~1
  it('workloads of an earlier run are listed before anything starts, then resumed, replaced or deleted', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const keep = workload('keep');
      const changedOld = workload('changed', { config: 'old' });
      const changedNew = workload('changed', { config: 'new' });
      const gone = workload('gone');
      const found = [keep, changedOld, gone].map((w) => ({
        instanceName: w.instanceName,
        runtime: 'fake',
        id: `old-${w.instanceName.workloadName}`,
        state: S.running(),
      }));
      const { out, runtime } = run(scheduler, cold('a', { a: { kind: 'serverHello', added: [keep, changedNew] } }), {
        existing: () => cold('--(l|)', { l: found }),
        states: (id) => (id === 'old-keep' ? cold('r', { r: S.running() }) : NEVER),
        workloadId: (n) => of(`old-${n.workloadName}`),
      });
      flush();
      expect(runtime.calls[0]).to.equal('list');
      expect(runtime.calls).to.include.members(['id keep', 'watch old-keep', 'delete old-changed', 'create changed', 'delete old-gone']);
      expect(runtime.calls).not.to.include('create keep');
      expect(runtime.calls.indexOf('delete old-changed')).to.be.below(runtime.calls.indexOf('create changed'));
      expect(
        out.every(([t]) => t >= 2),
        'nothing before the list arrived',
      ).to.equal(true);
      expect(out.map(([, s]) => s)).to.include.members([
        'keep: Running(Ok)',
        'changed: Stopping(RequestedAtRuntime)',
        'changed: Removed',
        'changed: Pending(Starting): Triggered at runtime.',
        'gone: Stopping(RequestedAtRuntime)',
        'gone: Removed',
      ]);
    });
  });

  // swdd~agent-skips-unknown-runtime~2, swdd~agent-supports-multiple-runtime-connectors~1
  it('an unknown runtime is reported as the released agent does (Pending(Starting), then Pending(StartingFailed) "Unsupported Runtime") and no retry follows', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const odd = workload('odd', { runtime: 'docker' });
      const { out } = run(scheduler, cold('a', { a: { kind: 'serverHello', added: [odd, init] } }), {});
      flush();
      expect(out).to.deep.equal([
        [0, 'odd: Pending(Starting): Triggered at runtime.'],
        [0, 'odd: Pending(StartingFailed): Unsupported Runtime'],
        [0, 'init_storage: Pending(Starting): Triggered at runtime.'],
      ]);
    });
  });

  it("an update of a workload of an unknown runtime removes the old instance's state and reports the new one through its own operation, dependencies first", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const odd1 = workload('odd', { runtime: 'docker', config: 'image: odd:1' });
      const odd2 = workload('odd', { runtime: 'docker', config: 'image: odd:2', dependencies: { init_storage: 'Succeeded' } });
      const runtime = new FakeRuntime({ states: () => cold('---s', { s: S.succeeded() }) });
      const out: string[] = [];
      const which = (s: WorkloadState) =>
        s.instanceName.id === odd1.instanceName.id ? 'odd1' : s.instanceName.id === odd2.instanceName.id ? 'odd2' : s.instanceName.workloadName;
      runWorkloads(
        cold('a-b', {
          a: { kind: 'serverHello', added: [odd1, init] },
          b: { kind: 'updateWorkload', added: [odd2], deleted: [deleted(odd1)] },
        }),
        { agentName: AGENT, runtimes: new Map([['fake', runtime]]), scheduler: asyncScheduler, prepare: () => of({}), release: () => EMPTY },
      ).subscribe((states) => states.forEach((s) => out.push(`${scheduler.now()} ${which(s)}: ${formatState(s.executionState)}`)));
      flush();
      expect(out).to.deep.equal([
        '0 odd1: Pending(Starting): Triggered at runtime.',
        '0 odd1: Pending(StartingFailed): Unsupported Runtime',
        '0 init_storage: Pending(Starting): Triggered at runtime.',
        '2 odd2: Pending(WaitingToStart)',
        '2 odd1: Stopping(RequestedAtRuntime)',
        '2 odd1: Removed',
        '3 init_storage: Succeeded(Ok)',
        '3 odd2: Pending(Starting): Triggered at runtime.',
        '3 odd2: Pending(StartingFailed): Unsupported Runtime',
      ]);
    });
  });

  // swdd~agent-stores-workload-states-of-its-workloads~1
  it("the server's echo of the agent's own states does not override them", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const app = workload('app', { dependencies: { init_storage: 'Succeeded' } });
      const { out } = run(
        scheduler,
        cold('a-b', {
          a: { kind: 'serverHello', added: [app] },
          b: { kind: 'updateWorkloadState', states: [stateOf(init, S.succeeded())] },
        }),
        {},
      );
      flush();
      // init_storage is this agent's workload name but not managed: the echo is ignored, app keeps waiting
      expect(out).to.deep.equal([[0, 'app: Pending(WaitingToStart)']]);
    });
  });
});
