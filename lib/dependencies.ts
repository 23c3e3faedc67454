// The dependency conditions of swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1 and its delete twin.
import { type ExecutionState, is } from './execution-state.js';
import type { AddCondition, DeleteCondition } from './workload.js';

/** swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1 (no state: not fulfilled). */
export function fulfillsAddCondition(state: ExecutionState | undefined, condition: AddCondition): boolean {
  switch (condition) {
    case 'Running':
      return is(state, 'Running', 'Ok');
    case 'Succeeded':
      return is(state, 'Succeeded', 'Ok');
    case 'Failed':
      return is(state, 'Failed', 'ExecFailed');
  }
}

/**
 * swdd~execution-states-of-workload-dependencies-fulfill-delete-conditions~1 (no state: fulfilled,
 * the dependent is gone; Pending(WaitingToStart) fulfills both to avoid a deadlock).
 */
export function fulfillsDeleteCondition(state: ExecutionState | undefined, condition: DeleteCondition): boolean {
  if (state === undefined || is(state, 'Pending', 'WaitingToStart')) return true;
  switch (condition) {
    case 'Running':
      return is(state, 'Running', 'Ok');
    case 'NotPendingNorRunning':
      return !is(state, 'Running', 'Ok') && !is(state, 'Pending');
  }
}
