import { type MonoTypeOperatorFunction, defer, filter, map } from 'rxjs';
import { type ExecutionState, keepLatest, sameState, transition } from '../lib/execution-state.js';
import type { WorkloadState } from '../lib/messages.js';
import { instanceKey } from '../lib/workload.js';

/**
 * swdd~agent-manager-hysteresis_on-workload-states-of-its-workloads~1: applies the state transitions
 * (swdd~api-workload-state-transitions~1) to the agent's own states and drops those that change nothing.
 */
export function applyHysteresis(): MonoTypeOperatorFunction<readonly WorkloadState[]> {
  return (states$) =>
    defer(() => {
      const last = new Map<string, ExecutionState>();
      return states$.pipe(
        map((states) =>
          states.flatMap((s) => {
            const key = instanceKey(s.instanceName);
            const previous = last.get(key);
            const next = transition(previous, s.executionState);
            if (previous && sameState(previous, next)) return [];
            keepLatest(last, key, next, next);
            return [next === s.executionState ? s : { ...s, executionState: next }];
          }),
        ),
        filter((states) => states.length > 0),
      );
    });
}
