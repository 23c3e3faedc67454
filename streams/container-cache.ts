// The PodmanCli container state cache, the one source every state checker of both Podman runtimes reads.
// Podman's event stream keeps it current at once; `podman ps` verifies it (when the stream starts, for
// every new watcher, every VERIFY_INTERVAL_MS) and is the one-second fallback while the stream is down.
// Events of containers it does not show yet (the host's other containers) cause no poll.
import {
  BehaviorSubject, EMPTY, Observable, ReplaySubject, Subject, catchError, concatWith, defer, distinctUntilChanged, exhaustMap, filter, map,
  merge, mergeMap, of, repeat, share, switchMap, takeUntil, tap, timer,
} from 'rxjs';
import type { Container } from '../lib/podman/container-state.js';
import type { ContainerCache, ContainerEvent, Snapshot } from '../lib/ports.js';

/** swdd~podmancli-container-state-cache-refresh~1: the refresh while no event stream keeps the cache current. */
export const CACHE_INTERVAL_MS = 1000;
/** How often `podman ps` verifies what the events said while the stream is healthy. */
export const VERIFY_INTERVAL_MS = 10_000;
/** How long after the event stream ended it is started again. */
export const EVENTS_RESTART_MS = 1000;


/**
 * swdd~podmancli-container-state-cache-all-containers~1, swdd~podmancli-container-state-cache-refresh~1:
 * while anything watches (and not when nothing does), the cache follows `events$` (a died event carries the
 * exit code; start and remove say the rest) and polls `list` to verify, every second while the stream is
 * down; every new watcher triggers one extra poll (swdd~podman-state-getter-reset-cache~1,
 * swdd~podman-kube-state-getter-reset-cache~1), coalesced with the polls under way. Without `events$` it
 * polls every second. A verification that finds a change no event announced takes the stream for stalled
 * and starts it again.
 */
export function containerCache(
  list: () => Observable<Container[]>, events$?: Observable<ContainerEvent>,
  /** `exits$`: earlier word of exits (conmon's exit files), applied like events, no health of its own. */
  { verifyMs = VERIFY_INTERVAL_MS, exits$ = EMPTY as Observable<ContainerEvent> } = {},
): ContainerCache {
  const refresh$ = new Subject<void>();
  let version = 0;
  const snapshots$ = defer(() => {
    /** The picture of all containers, from the last poll and the events since. */
    let view: Map<string, Container> | undefined;
    /** Exit codes the died events told, for containers Podman still shows as `stopped`. */
    const exitCodes = new Map<string, number>();
    /** Exits told early (conmon's exit files) that Podman's own events have not caught up with yet. */
    const early = new Set<string>();
    /** Events that came while a poll ran: applied again on top of its result. */
    let duringPoll: ContainerEvent[] | undefined;
    let pending = false;
    const healthy$ = new BehaviorSubject(false);
    const restart$ = new Subject<void>();

    /** The number of the poll the view rests on. */
    let base = 0;
    /**
     * A snapshot is numbered after the poll it rests on (counted from when that poll started): an event
     * changes a container or two, the rest is as old as that poll, so it is no fresher than it.
     */
    const snapshot = (poll = base): Snapshot => ({ poll, containers: [...view!.values()] });
    /**
     * Applies an event to the view; true when it changed what the watchers see. A container the view does
     * not show yet is nobody's concern: a new workload's state checker asks for a poll of its own, so the
     * host's other containers, however they churn, cause no poll.
     */
    const apply = (e: ContainerEvent, to: Map<string, Container>): boolean => {
      const c = to.get(e.id);
      if (e.status === 'died' || e.status === 'cleanup') {
        if (e.exitCode !== undefined) exitCodes.set(e.id, e.exitCode);
        if (!c) return false;
        to.set(e.id, { ...c, State: 'exited', ExitCode: exitCodes.get(e.id) ?? c.ExitCode });
        return true;
      }
      if (e.status === 'start') {
        // Podman's stream is behind the exit files: the start it reports now is older than the exit known.
        if (early.has(e.id)) return false;
        exitCodes.delete(e.id);
        if (!c) return false;
        to.set(e.id, { ...c, State: 'running' });
        return true;
      }
      if (e.status === 'remove') {
        exitCodes.delete(e.id);
        early.delete(e.id);
        return to.delete(e.id);
      }
      // create, init (old news for a container the view shows) and what says nothing about a state
      return false;
    };
    /**
     * Podman shows a container that died as `stopped` for a moment: with its exit code known, it has exited.
     * Until Podman's own died event comes, `podman ps` may still show a container `running` whose exit
     * conmon already told: that exit stands (only a newer start undoes it).
     */
    const settled = (c: Container): Container =>
      ((c.State === 'stopped' && exitCodes.has(c.Id)) || (c.State === 'running' && early.has(c.Id) && exitCodes.has(c.Id))
        ? { ...c, State: 'exited', ExitCode: exitCodes.get(c.Id) } : c);

    const onEvent = (e: ContainerEvent, fromExitFile = false): Snapshot[] => {
      if (e.status === 'died') {
        if (fromExitFile) early.add(e.id);
        else early.delete(e.id);
      }
      duringPoll?.push(e);
      // Before the first poll there is nothing to apply to: that poll (a watcher's) is under way.
      return view && apply(e, view) ? [snapshot()] : [];
    };
    const onPoll = (containers: readonly Container[], poll: number): Snapshot => {
      const fresh = new Map(containers.map((c) => [c.Id, settled(c)]));
      for (const e of duringPoll ?? []) apply(e, fresh);
      // A running container the events left running, or one they never removed, that Podman says otherwise: missed.
      if (healthy$.value && view && [...view.values()].some((c) => c.State === 'running' && fresh.get(c.Id)?.State !== 'running')) restart$.next();
      [view, base] = [fresh, poll];
      return snapshot(poll);
    };

    const polls$ = defer(() => {
      pending = false;
      duringPoll = [];
      const poll = ++version;
      return list().pipe(
        map((containers) => onPoll(containers, poll)),
        catchError((err: unknown) => of<Snapshot>({ poll, error: err instanceof Error ? err.message : String(err) })),
        tap({ finalize: () => (duringPoll = undefined) }),
      );
    });
    // A change of the stream's health is verified at once; the first watcher's own poll starts the cache.
    const ticks$ = events$
      ? healthy$.pipe(distinctUntilChanged(), switchMap((healthy, i) => {
        const period = healthy ? verifyMs : CACHE_INTERVAL_MS;
        return timer(i === 0 ? period : 0, period);
      }))
      : timer(CACHE_INTERVAL_MS, CACHE_INTERVAL_MS);
    const polled$ = merge(ticks$, refresh$).pipe(
      tap(() => (pending = true)),
      // A trigger that comes while a poll runs is served by one more poll right after it.
      exhaustMap(() => polls$.pipe(repeat({ delay: () => (pending ? of(0) : EMPTY) }))),
    );
    // The stream, started again a while after it ended, failed or was taken for stalled; the cache polls
    // every second meanwhile.
    const evented$ = events$
      ? defer(() => {
        healthy$.next(true);
        return events$.pipe(takeUntil(restart$), catchError(() => EMPTY));
      }).pipe(
        concatWith(defer(() => (healthy$.next(false), EMPTY))),
        repeat({ delay: () => timer(EVENTS_RESTART_MS) }),
        mergeMap((e) => onEvent(e)),
      )
      : EMPTY;
    return merge(evented$, exits$.pipe(mergeMap((e) => onEvent(e, true))), polled$);
  }).pipe(share({ connector: () => new ReplaySubject<Snapshot>(1), resetOnRefCountZero: true }));

  return {
    fresh: () => defer(() => {
      const since = version;
      return merge(snapshots$, defer(() => (refresh$.next(), EMPTY))).pipe(filter((s) => s.poll > since));
    }),
  };
}
