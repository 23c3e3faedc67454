import { expect } from 'chai';
import { EMPTY } from 'rxjs';
import { ExecutionState } from '../../lib/execution-state.js';
import type { ExistingWorkload } from '../../lib/runtime-connector.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { type ManagerDeps, planInitial, planUpdate } from '../../streams/manage-workloads.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { AGENT, deleted, stateOf, workload } from '../../scripts/harness/fixtures.js';

const deps: ManagerDeps = { agentName: AGENT, runtimes: new Map([['fake', new FakeRuntime()]]) };
const existing = (spec: WorkloadSpec, state = ExecutionState.running()): ExistingWorkload => ({
  instanceName: spec.instanceName,
  runtime: 'fake',
  id: `old-${spec.instanceName.workloadName}`,
  state,
});

const a = workload('a');
const b = workload('b');
const c = workload('c');
const aChanged = workload('a', { config: 'image: a:2' });

describe('RuntimeManager: the initial list of workloads', () => {
  // swdd~agent-existing-workloads-starts-new-if-not-found~1
  it('creates what is not found', () => {
    const plan = planInitial(new Map(), [a, b], [], deps);
    expect(plan.operations).to.deep.equal([
      { kind: 'create', spec: a },
      { kind: 'create', spec: b },
    ]);
    expect(plan.commands).to.deep.equal([]);
  });

  // swdd~agent-existing-workloads-reuse-unmodified~1, swdd~agent-existing-workloads-resume-existing~2, swdd~agent-stores-running-workload~1
  it('resumes a found workload with the same instance name that runs', () => {
    const managed = new Map<string, WorkloadSpec>();
    const plan = planInitial(managed, [a], [existing(a)], deps);
    expect(plan.commands).to.deep.equal([{ workloadName: 'a', command: { kind: 'resume', spec: a } }]);
    expect(plan.operations).to.deep.equal([]);
    expect([...managed.keys()]).to.deep.equal(['a']);
  });

  // swdd~agent-existing-workloads-replace-updated~4
  it('replaces a found workload whose config changed: deleted at once, created respecting dependencies', () => {
    const found = existing(a);
    const plan = planInitial(new Map(), [aChanged], [found], deps);
    expect(plan.commands).to.deep.equal([{ workloadName: 'a', command: { kind: 'removeExisting', existing: found, final: false } }]);
    expect(plan.operations).to.deep.equal([{ kind: 'create', spec: aChanged }]);
  });

  // swdd~agent-existing-workloads-replace-updated~4
  it('replaces a found workload that does not run', () => {
    const found = existing(a, ExecutionState.succeeded());
    const plan = planInitial(new Map(), [a], [found], deps);
    expect(plan.commands).to.deep.equal([{ workloadName: 'a', command: { kind: 'removeExisting', existing: found, final: false } }]);
    expect(plan.operations).to.deep.equal([{ kind: 'create', spec: a }]);
  });

  it('a found workload that exited 0 with the same config is kept for its create (started again in place); one that failed is replaced', () => {
    const restartable: ManagerDeps = { agentName: AGENT, runtimes: new Map([['fake', new FakeRuntime({ startAgain: () => EMPTY })]]) };
    const succeeded = existing(a, ExecutionState.succeeded());
    const failed = existing(b, ExecutionState.failed("Exit code: '1'"));
    const plan = planInitial(new Map(), [a, b], [succeeded, failed], restartable);
    expect(plan.commands).to.deep.equal([
      { workloadName: 'a', command: { kind: 'adopt', existing: succeeded } },
      { workloadName: 'b', command: { kind: 'removeExisting', existing: failed, final: false } },
    ]);
    expect(plan.operations).to.deep.equal([
      { kind: 'create', spec: a },
      { kind: 'create', spec: b },
    ]);
  });

  // swdd~agent-existing-workloads-delete-unneeded~2
  it('deletes found workloads that are not in the list', () => {
    const found = existing(c);
    const plan = planInitial(new Map(), [a], [found], deps);
    expect(plan.commands).to.deep.equal([{ workloadName: 'c', command: { kind: 'removeExisting', existing: found, final: true } }]);
  });

  it('after a reconnect: keeps unchanged workloads, updates changed ones, deletes the ones no longer listed', () => {
    const managed = new Map([
      ['a', a],
      ['b', b],
    ]);
    const plan = planInitial(managed, [aChanged, c], [existing(a), existing(b)], deps);
    expect(plan.operations).to.deep.equal([
      { kind: 'delete', deleted: deleted(b) },
      { kind: 'update', spec: aChanged, deleted: deleted(a) },
      { kind: 'create', spec: c },
    ]);
    expect(plan.commands).to.deep.equal([]);
  });

  // swdd~agent-skips-unknown-runtime~2
  it('a workload of an unknown runtime goes through its own operation like any other (its loop reports it)', () => {
    const odd = workload('odd', { runtime: 'docker' });
    const managed = new Map<string, WorkloadSpec>();
    const plan = planInitial(managed, [odd, a], [], deps);
    expect(plan.reports).to.deep.equal([]);
    expect(plan.operations).to.deep.equal([
      { kind: 'create', spec: odd },
      { kind: 'create', spec: a },
    ]);
  });
});

describe('RuntimeManager: subsequent UpdateWorkload', () => {
  // swdd~agent-handles-new-workload-operations~1, swdd~agent-transforms-update-workload-message-to-workload-operations~1, swdd~agent-handle-deleted-before-added-workloads~1
  it('deletes come before adds', () => {
    const managed = new Map([
      ['a', a],
      ['b', b],
    ]);
    const plan = planUpdate(managed, [c], [deleted(b)], deps);
    expect(plan.operations).to.deep.equal([
      { kind: 'delete', deleted: deleted(b) },
      { kind: 'create', spec: c },
    ]);
    expect([...managed.keys()]).to.deep.equal(['a', 'c']);
  });

  // swdd~agent-updates-deleted-and-added-workloads~1
  it('a workload in both lists is an update carrying the delete conditions', () => {
    const managed = new Map([['a', a]]);
    const d = deleted(a, { b: 'Running' });
    expect(planUpdate(managed, [aChanged], [d], deps).operations).to.deep.equal([{ kind: 'update', spec: aChanged, deleted: d }]);
  });

  // swdd~agent-update-on-add-known-workload~1
  it('an added workload that already runs is an update', () => {
    const managed = new Map([['a', a]]);
    expect(planUpdate(managed, [aChanged], [], deps).operations).to.deep.equal([{ kind: 'update', spec: aChanged, deleted: deleted(a) }]);
  });

  // swdd~agent-add-on-update-missing-workload~1, swdd~agent-added-creates-workload~1
  it('an update of an unknown workload is a create', () => {
    expect(planUpdate(new Map(), [aChanged], [deleted(a)], deps).operations).to.deep.equal([{ kind: 'create', spec: aChanged }]);
  });

  // swdd~agent-deletes-workload~1
  it('a deleted workload that is not added again is deleted', () => {
    const managed = new Map([['a', a]]);
    expect(planUpdate(managed, [], [deleted(a)], deps).operations).to.deep.equal([{ kind: 'delete', deleted: deleted(a) }]);
    expect(managed.size).to.equal(0);
  });

  // swdd~agent-uses-specified-runtime~1, swdd~agent-skips-unknown-runtime~2
  it('an unknown runtime does not stop the rest of the message', () => {
    const odd = workload('odd', { runtime: 'docker' });
    const plan = planUpdate(new Map(), [odd, b], [], deps);
    expect(plan.operations).to.deep.equal([
      { kind: 'create', spec: odd },
      { kind: 'create', spec: b },
    ]);
  });

  it('a delete of a workload never run here clears its state with Removed', () => {
    expect(planUpdate(new Map(), [], [deleted(a)], deps).reports).to.deep.equal([stateOf(a, ExecutionState.removed())]);
  });
});
