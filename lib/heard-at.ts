// When the agent heard of the change an execution state shows (a Podman event's own time, a health check,
// conmon's exit file, the poll that found it): kept beside the state object, never in it, so nothing
// that compares, stores or sends states sees it. Read by the metrics when the state is reported.
import type { ExecutionState } from './execution-state.js';

const heard = new WeakMap<ExecutionState, number>();

/** Marks `state` as showing a change heard at `at` (ms, wall clock); returns it. */
export function heardAt<S extends ExecutionState>(state: S, at: number | undefined): S {
  if (at !== undefined) heard.set(state, at);
  return state;
}

/** When the change `state` shows was heard, if it shows one. */
export const whenHeard = (state: ExecutionState): number | undefined => heard.get(state);
