import { expect } from 'chai';
import { ExecutionState } from '../../lib/execution-state.js';
import { WorkloadScheduler, atTheDoor } from '../../lib/scheduler.js';
import { WorkloadStateStore } from '../../lib/state-store.js';
import { deleted, stateOf, workload } from '../../scripts/harness/fixtures.js';

const S = ExecutionState;
const setup = () => {
  const store = new WorkloadStateStore();
  const scheduler = new WorkloadScheduler(store);
  const change = (...states: ReturnType<typeof stateOf>[]) => scheduler.statesChanged(store.update(states));
  return { store, scheduler, change };
};

const storage = workload('storage_provider', { dependencies: { init_storage: 'Succeeded' } });
const init = workload('init_storage');
const logger = workload('logger', { dependencies: { storage_provider: 'Running' } });

describe('WorkloadScheduler', () => {
  // swdd~agent-handles-new-workload-operations~1
  it('a create without dependencies is ready at once', () => {
    const { scheduler } = setup();
    expect(scheduler.schedule([{ kind: 'create', spec: init }])).to.deep.equal({ ready: [{ kind: 'create', spec: init }], reports: [], waits: [] });
  });

  // swdd~agent-enqueues-unfulfilled-create~1
  it('a create with unmet add conditions waits and reports Pending(WaitingToStart) once', () => {
    const { scheduler, change } = setup();
    const out = scheduler.schedule([{ kind: 'create', spec: storage }]);
    expect(out.ready).to.deep.equal([]);
    expect(out.reports).to.deep.equal([stateOf(storage, S.waitingToStart())]);
    expect(out.waits, 'what it waits for, for --debug, and what it will start (its image is pulled meanwhile)').to.deep.equal([
      { workloadName: 'storage_provider', waitsFor: 'init_storage to be Succeeded (no state yet)', starts: storage },
    ]);
    // swdd~agent-keeps-workloads-with-unfulfilled-workload-dependencies-in-queue~1: not reported again
    expect(change(stateOf(init, S.running()))).to.deep.equal({ ready: [], reports: [], waits: [] });
    expect(scheduler.waiting).to.equal(1);
  });

  // swdd~agent-handles-workloads-with-fulfilled-dependencies~1, swdd~workload-ready-to-create-on-fulfilled-dependencies~1
  it('a waiting create is released when its dependency reaches the condition', () => {
    const { scheduler, change } = setup();
    scheduler.schedule([{ kind: 'create', spec: storage }]);
    expect(change(stateOf(init, S.succeeded())).ready).to.deep.equal([{ kind: 'create', spec: storage }]);
    expect(scheduler.waiting).to.equal(0);
  });

  it("a dependency on a workload of another agent is released by that agent's state", () => {
    const { scheduler, change } = setup();
    const remote = workload('remote_db', { agent: 'agent_B' });
    const app = workload('app', { dependencies: { remote_db: 'Running' } });
    scheduler.schedule([{ kind: 'create', spec: app }]);
    expect(change(stateOf(remote, S.running())).ready).to.deep.equal([{ kind: 'create', spec: app }]);
  });

  // swdd~agent-enqueues-unfulfilled-delete~1, swdd~workload-ready-to-delete-on-fulfilled-dependencies~1
  it('a delete waits with Stopping(WaitingToStop) until its dependents meet the delete conditions', () => {
    const { scheduler, change } = setup();
    change(stateOf(logger, S.running()));
    const op = { kind: 'delete', deleted: deleted(storage, { logger: 'NotPendingNorRunning' }) } as const;
    expect(scheduler.schedule([op])).to.deep.equal({
      ready: [],
      reports: [stateOf(storage, S.waitingToStop())],
      waits: [{ workloadName: 'storage_provider', waitsFor: 'logger to be neither pending nor running (now Running(Ok))' }],
    });
    expect(change(stateOf(logger, S.stoppingRequested())).ready).to.deep.equal([op]);
  });

  it('a delete whose dependents have no state is ready (they are gone)', () => {
    const { scheduler } = setup();
    const op = { kind: 'delete', deleted: deleted(storage, { logger: 'NotPendingNorRunning' }) } as const;
    expect(scheduler.schedule([op]).ready).to.deep.equal([op]);
  });

  // swdd~agent-enqueues-update-with-unfulfilled-delete~1
  it('an update with unmet delete conditions waits whole, reporting Stopping(WaitingToStop)', () => {
    const { scheduler, change } = setup();
    change(stateOf(logger, S.running()));
    const next = workload('storage_provider', { config: 'v2', dependencies: { init_storage: 'Succeeded' } });
    const op = { kind: 'update', spec: next, deleted: deleted(storage, { logger: 'NotPendingNorRunning' }) } as const;
    expect(scheduler.schedule([op])).to.deep.equal({
      ready: [],
      reports: [stateOf(storage, S.waitingToStop())],
      waits: [{ workloadName: 'storage_provider', waitsFor: 'logger to be neither pending nor running (now Running(Ok))', starts: next }],
    });
    change(stateOf(init, S.succeeded()));
    expect(change(stateOf(logger, S.succeeded())).ready).to.deep.equal([op]);
  });

  // swdd~agent-handles-update-with-fulfilled-delete~1, swdd~agent-shall-not-enqueue-update-delete-only-workload-operation~1
  it('an update with met delete but unmet add conditions deletes now and waits to create', () => {
    const { scheduler, change } = setup();
    const next = workload('storage_provider', { config: 'v2', dependencies: { init_storage: 'Succeeded' } });
    const op = { kind: 'update', spec: next, deleted: deleted(storage, { logger: 'NotPendingNorRunning' }) } as const;
    expect(scheduler.schedule([op])).to.deep.equal({
      ready: [{ kind: 'updateDeleteOnly', spec: next, deleted: op.deleted }],
      reports: [stateOf(next, S.waitingToStart())],
      waits: [{ workloadName: 'storage_provider', waitsFor: 'init_storage to be Succeeded (no state yet)', starts: next }],
    });
    expect(change(stateOf(init, S.succeeded())).ready).to.deep.equal([{ kind: 'create', spec: next }]);
  });

  it('an update with all conditions met is ready whole', () => {
    const { scheduler } = setup();
    const next = workload('init_storage', { config: 'v2' });
    const op = { kind: 'update', spec: next, deleted: deleted(init) } as const;
    expect(scheduler.schedule([op]).ready).to.deep.equal([op]);
  });

  it('a new operation replaces the waiting one of the same workload; an update of a never-started create is a create', () => {
    const { scheduler } = setup();
    scheduler.schedule([{ kind: 'create', spec: storage }]);
    const next = workload('storage_provider', { config: 'v2', dependencies: { init_storage: 'Succeeded' } });
    const out = scheduler.schedule([{ kind: 'update', spec: next, deleted: deleted(storage) }]);
    expect(out.reports).to.deep.equal([stateOf(storage, S.removed()), stateOf(next, S.waitingToStart())]);
    expect(scheduler.waiting).to.equal(1);
    const del = { kind: 'delete', deleted: deleted(next) } as const;
    expect(scheduler.schedule([del]).ready).to.deep.equal([del]);
    expect(scheduler.waiting).to.equal(0);
  });

  it('re-evaluates only the operations waiting on a changed workload', () => {
    const { scheduler, store } = setup();
    const specs = Array.from({ length: 1000 }, (_, i) => workload(`w${i}`, { dependencies: { [`dep${i}`]: 'Running' } }));
    scheduler.schedule(specs.map((spec) => ({ kind: 'create', spec }) as const));
    let lookups = 0;
    const statesOf = store.statesOf.bind(store);
    store.statesOf = (name) => {
      lookups++;
      return statesOf(name);
    };
    scheduler.statesChanged(store.update([stateOf(workload('dep7'), S.running())]));
    expect(lookups).to.be.at.most(2, 'the 999 others are not looked at');
    expect(scheduler.waiting).to.equal(999);
  });
});

describe('WorkloadStateStore', () => {
  // swdd~agent-manager-stores-all-workload-states~1
  it('stores states; Removed means not stored', () => {
    const store = new WorkloadStateStore();
    expect([...store.update([stateOf(init, S.running()), stateOf(logger, S.starting())])]).to.deep.equal(['init_storage', 'logger']);
    expect(store.statesOf('init_storage')).to.deep.equal([S.running()]);
    store.update([stateOf(init, S.removed())]);
    expect(store.statesOf('init_storage')).to.deep.equal([]);
    expect(store.all()).to.deep.equal([stateOf(logger, S.starting())]);
  });
});

describe("other agents' states at the door", () => {
  const db = workload('db', { agent: 'agent_B' });
  const cache = workload('cache', { agent: 'agent_B' });
  const app = workload('app', { dependencies: { db: 'Running' } });

  // swdd~agent-manager-stores-all-workload-states~1, swdd~agent-handles-update-workload-state-requests~1
  it('keeps every state, and wakes the scheduler only for one a waiting workload depends on', () => {
    const store = new WorkloadStateStore();
    const scheduler = new WorkloadScheduler(store);
    expect(scheduler.schedule([{ kind: 'create', spec: app }]).ready).to.deep.equal([]);
    // A state nobody waits on: stored, and no wake-up.
    expect(atTheDoor(store, scheduler, [stateOf(cache, ExecutionState.running())])).to.deep.equal([]);
    expect(store.statesOf('cache')).to.deep.equal([ExecutionState.running()]);
    // The state app waits on: a wake-up, and the scheduler lets app go.
    const waited = atTheDoor(store, scheduler, [stateOf(db, ExecutionState.running())]);
    expect(waited).to.deep.equal(['db']);
    expect(scheduler.statesChanged(waited).ready.map((op) => op.kind)).to.deep.equal(['create']);
    // Nobody waits any more: the next state of db wakes nothing.
    expect(atTheDoor(store, scheduler, [stateOf(db, ExecutionState.succeeded())])).to.deep.equal([]);
  });

  // swdd~agent-manager-stores-all-workload-states~1
  it("drops a removed workload's state: memory does not grow with the churn of a fleet", () => {
    const store = new WorkloadStateStore();
    const scheduler = new WorkloadScheduler(store);
    const many = Array.from({ length: 1000 }, (_, i) => workload(`w${i}`, { agent: 'agent_B' }));
    atTheDoor(
      store,
      scheduler,
      many.map((w) => stateOf(w, ExecutionState.running())),
    );
    expect(store.all()).to.have.length(1000);
    atTheDoor(
      store,
      scheduler,
      many.map((w) => stateOf(w, ExecutionState.removed())),
    );
    expect(store.all()).to.deep.equal([]);
  });
});
