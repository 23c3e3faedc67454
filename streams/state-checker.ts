// swdd~agent-provides-generic-state-checker-implementation~1: one state checker for every runtime; a
// runtime supplies only how to read a workload's state out of a snapshot of its containers.
import { asyncScheduler, distinctUntilChanged, filter, map, scan } from 'rxjs';
import { ExecutionState, heardAt, sameState } from '../lib/execution-state.js';

import { lastWords } from '../lib/cli-words.js';
import type { ContainerCache, Snapshot, StateReading, WatchState } from '../lib/ports.js';

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
 */
export function stateChecker(cache: ContainerCache, engine = 'Podman'): WatchState {
  return (read, ids) =>
    cache.fresh(ids).pipe(
      map((s: Snapshot) => {
        const reading = s.containers ? read(s.containers) : unknown(engine, s.error);
        return { ...reading, state: heardAt(reading.state, s.heardAt) };
      }),
      scan(
        (acc: { reading?: StateReading; since?: number }, reading) => ({ reading, since: reading.transient ? (acc.since ?? asyncScheduler.now()) : undefined }),
        {},
      ),
      filter(({ since }) => since === undefined || asyncScheduler.now() - since >= TRANSIENT_MS),
      map(({ reading }) => reading!.state),
      distinctUntilChanged(sameState),
    );
}
