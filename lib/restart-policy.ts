import { type ExecutionState, is } from './execution-state.js';
import type { RestartPolicy } from './workload.js';

/** swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2 */
export function needsRestart(policy: RestartPolicy, state: ExecutionState): boolean {
  switch (policy) {
    case 'Always':
      return is(state, 'Succeeded', 'Ok') || is(state, 'Failed', 'ExecFailed');
    case 'OnFailure':
      return is(state, 'Failed', 'ExecFailed');
    case 'Never':
      return false;
  }
}
