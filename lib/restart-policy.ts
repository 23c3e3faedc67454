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

/**
 * The crash-loop back-off (this agent's own, as kubelet's CrashLoopBackOff): a restart after a run shorter
 * than `resetAfterMs` that follows another such run waits, from `firstDelayMs` doubling up to `maxDelayMs`.
 * The first restart after a long run is immediate. `firstDelayMs` 0 restarts at once, always (the released agent).
 */
export interface CrashLoopBackoff {
  readonly firstDelayMs: number;
  readonly maxDelayMs: number;
  readonly resetAfterMs: number;
}

/** kubelet's: 10 s, doubling, at most 5 min, reset after 10 min of running. */
export const KUBELET_BACKOFF: CrashLoopBackoff = { firstDelayMs: 10_000, maxDelayMs: 300_000, resetAfterMs: 600_000 };

/** The restart after a run of `ranMs` that followed `shortRuns` short runs in a row: the short runs now, and the wait. */
export function nextRestart(shortRuns: number, ranMs: number, backoff: CrashLoopBackoff): { readonly shortRuns: number; readonly delayMs: number } {
  const now = ranMs < backoff.resetAfterMs ? shortRuns + 1 : 1;
  const delayMs = now <= 1 || backoff.firstDelayMs <= 0 ? 0 : Math.min(backoff.firstDelayMs * 2 ** Math.min(now - 2, 30), backoff.maxDelayMs);
  return { shortRuns: now, delayMs };
}
