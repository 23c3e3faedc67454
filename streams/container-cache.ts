// The PodmanCli container state cache: one `podman ps` for all workloads of both Podman runtimes.
import {
  EMPTY, Observable, ReplaySubject, Subject, catchError, defer, exhaustMap, filter, map, merge, of, repeat, share, tap, timer,
} from 'rxjs';
import type { Container } from '../lib/podman/container-state.js';
import type { ContainerCache, Snapshot } from '../lib/ports.js';

export const CACHE_INTERVAL_MS = 1000;

/**
 * swdd~podmancli-container-state-cache-all-containers~1, swdd~podmancli-container-state-cache-refresh~1:
 * polls `list` at most once per interval while anything watches (and stops when nothing does);
 * every new watcher triggers one extra poll (swdd~podman-state-getter-reset-cache~1,
 * swdd~podman-kube-state-getter-reset-cache~1), coalesced with the polls under way.
 */
export function containerCache(
  list: () => Observable<Container[]>,
  /** Emits when a container changed (e.g. `podman events`): the cache polls at once instead of at the next tick. */
  changes$: Observable<unknown> = EMPTY,
): ContainerCache {
  const refresh$ = new Subject<void>();
  let polls = 0;
  let pending = false;
  const poll$ = defer(() => {
    pending = false;
    const poll = ++polls;
    return list().pipe(
      map((containers): Snapshot => ({ poll, containers })),
      catchError((err: unknown) => of<Snapshot>({ poll, error: err instanceof Error ? err.message : String(err) })),
    );
  });
  const snapshots$ = merge(timer(CACHE_INTERVAL_MS, CACHE_INTERVAL_MS), refresh$, changes$).pipe(
    tap(() => (pending = true)),
    // A trigger that comes while a poll runs is served by one more poll right after it.
    exhaustMap(() => poll$.pipe(repeat({ delay: () => (pending ? of(0) : EMPTY) }))),
    share({ connector: () => new ReplaySubject<Snapshot>(1), resetOnRefCountZero: true }),
  );
  return {
    fresh: () => defer(() => {
      const since = polls;
      return merge(snapshots$, defer(() => (refresh$.next(), EMPTY))).pipe(filter((s) => s.poll > since));
    }),
  };
}
