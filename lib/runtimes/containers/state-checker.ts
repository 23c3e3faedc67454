// swdd~agent-provides-generic-state-checker-implementation~1: one state checker for every runtime; a
// runtime supplies only how to read a workload's state out of a snapshot of its containers.
import { Observable, type TimestampProvider } from 'rxjs';
import { ExecutionState, heardAt, sameState } from '../../execution-state.js';

import { lastWords } from '../../cli-words.js';
import type { ContainerCache, Snapshot, StateReading, WatchState } from '../../ports.js';

/** How long a transient state (Podman's `stopped` while a container exits) must last to be reported. */
export const TRANSIENT_MS = 1000;

/** The engine could not be asked: its own name, and its CLI's last words without their timestamp, so that the same failure reads the same. */
const unknown = (engine: string, error?: string): StateReading => ({
  state: ExecutionState.unknown(
    error ? `${engine} could not be asked for the container states: ${lastWords(error)}` : `${engine} could not be asked for the container states.`,
  ),
  transient: false,
});

/**
 * swdd~generic-state-checker-sends-workload-state~2: maps every fresh snapshot to a state and emits only
 * changes. A transient reading is held back until it has lasted TRANSIENT_MS: reported as Stopping, it
 * would pin an exiting workload there (a container stopped from outside stays so, and is reported).
 * One step per snapshot, not a chain of operators: every watcher reads every snapshot of a burst.
 */
export function stateChecker(cache: ContainerCache, clock: TimestampProvider, engine: string): WatchState {
  return (read, ids, made) =>
    new Observable<ExecutionState>((subscriber) => {
      /** Since when the reading has been transient; the state last emitted. */
      let since: number | undefined;
      let last: ExecutionState | undefined;
      /** Whether the last snapshot read showed the containers (not a failure to ask): then one that changed none of `ids` changes nothing. */
      let shown = false;
      return cache.fresh(ids, made).subscribe({
        next: (s: Snapshot) => {
          // A snapshot of other containers' news is passed over without a reading: a burst wakes only the watchers it concerns.
          if (shown && since === undefined && ids !== undefined && s.containers && s.changed && !ids.some((id) => s.changed!.has(id))) return;
          shown = s.containers !== undefined;
          const reading = s.containers ? read(s.containers) : unknown(engine, s.error);
          since = reading.transient ? (since ?? clock.now()) : undefined;
          if (since !== undefined && clock.now() - since < TRANSIENT_MS) return;
          if (last !== undefined && sameState(last, reading.state)) return;
          last = reading.state;
          subscriber.next(heardAt(reading.state, s.heardAt));
        },
        error: (err: unknown) => subscriber.error(err),
        complete: () => subscriber.complete(),
      });
    });
}
