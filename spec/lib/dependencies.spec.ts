import { expect } from 'chai';
import { fulfillsAddCondition, fulfillsDeleteCondition } from '../../lib/dependencies.js';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import type { AddCondition, DeleteCondition } from '../../lib/workload.js';

const S = ExecutionState;
const every = [
  S.agentDisconnected(),
  S.initial(),
  S.waitingToStart(),
  S.starting(),
  S.startingFailed(),
  S.running(),
  S.stopping(),
  S.waitingToStop(),
  S.stoppingRequested(),
  S.deleteFailed(),
  S.succeeded(),
  S.failed(),
  S.unknown(),
  S.lost(),
  S.notScheduled(),
];

describe('DependencyStateValidator', () => {
  // swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1, swdd~api-add-conditions-for-dependencies~1
  describe('add conditions', () => {
    const table: Record<AddCondition, ExecutionState> = { Running: S.running(), Succeeded: S.succeeded(), Failed: S.failed("Exit code: '1'") };
    for (const [condition, fulfilling] of Object.entries(table) as Array<[AddCondition, ExecutionState]>) {
      it(`ADD_COND_${condition.toUpperCase()} is met by ${formatState(fulfilling)} only`, () => {
        for (const state of every) {
          const expected = state.state === fulfilling.state && state.substate === fulfilling.substate;
          expect(fulfillsAddCondition(state, condition), formatState(state)).to.equal(expected);
        }
      });
    }
    it('no state means the add condition is not met', () => {
      for (const c of ['Running', 'Succeeded', 'Failed'] as const) expect(fulfillsAddCondition(undefined, c)).to.equal(false);
    });
  });

  // swdd~execution-states-of-workload-dependencies-fulfill-delete-conditions~1, swdd~api-delete-conditions-for-dependencies~1
  describe('delete conditions', () => {
    it('DEL_COND_NOT_PENDING_NOR_RUNNING is met by all but Running(Ok) and Pending(*), and by Pending(WaitingToStart)', () => {
      for (const state of every) {
        const expected = !(state.state === 'Running' || state.state === 'Pending') || state.substate === 'WaitingToStart';
        expect(fulfillsDeleteCondition(state, 'NotPendingNorRunning'), formatState(state)).to.equal(expected);
      }
    });
    it('DEL_COND_RUNNING is met by Running(Ok) and by Pending(WaitingToStart)', () => {
      for (const state of every) {
        const expected = state.state === 'Running' || state.substate === 'WaitingToStart';
        expect(fulfillsDeleteCondition(state, 'Running'), formatState(state)).to.equal(expected);
      }
    });
    it('no state (the dependent is gone) meets every delete condition', () => {
      for (const c of ['Running', 'NotPendingNorRunning'] as DeleteCondition[]) expect(fulfillsDeleteCondition(undefined, c)).to.equal(true);
    });
  });
});
