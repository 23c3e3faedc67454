// The container state cache, the one source every state checker of a container engine's runtimes reads
// (Podman's for podman and podman-kube; containerd's, fed the same way by nerdctl, for containerd).
// Podman's event stream keeps it current at once; `podman ps` verifies it (when the stream starts, for
// every new watcher, every VERIFY_INTERVAL_MS) and is the one-second fallback while the stream is down.
// Events of containers it does not show yet (the host's other containers) cause no poll.
import {
  BehaviorSubject,
  EMPTY,
  NEVER,
  Observable,
  ReplaySubject,
  Subject,
  type SchedulerLike,
  Subscription,
  catchError,
  concat,
  debounceTime,
  defer,
  distinctUntilChanged,
  exhaustMap,
  finalize,
  map,
  merge,
  of,
  race,
  repeat,
  share,
  switchMap,
  takeUntil,
  tap,
  timer,
} from 'rxjs';
import type { Logger } from '../../logger.js';
import { spread } from '../../spread.js';
import { type ContainerView, EMPTY_VIEW, type ViewInput, type ViewStep, changesBetween, stepView } from '../../container-view.js';
import type { Container, ContainerCache, ContainerChange, ContainerEvent, Engine, Notes, Snapshot } from '../../ports.js';

/** swdd~podmancli-container-state-cache-refresh~1: the refresh while no event stream keeps the cache current. */
export const CACHE_INTERVAL_MS = 1000;
/** How often `podman ps` verifies what the events said while the stream is healthy. */
export const VERIFY_INTERVAL_MS = 10_000;
/** How long after the event stream ended it is started again. */
export const EVENTS_RESTART_MS = 1000;
/**
 * How long the cache keeps following Podman after its last watcher left: a workload's restart (its watcher
 * leaves, the next one comes) never restarts `podman events`, while an agent with nothing to watch stops.
 */
export const KEEP_FOLLOWING_MS = 10_000;
/**
 * How long a new watcher that names its containers waits for their events before it asks for a poll, while
 * a poll is under way (a burst of creates): `podman events` reads Podman's event file every 250 ms, so a new
 * container's start event comes within ~300 ms of `podman run`. A burst of creates so costs no poll each.
 */
export const NEWS_WAIT_MS = 300;

/**
 * swdd~podmancli-container-state-cache-all-containers~1, swdd~podmancli-container-state-cache-refresh~1:
 * while anything watches (and for KEEP_FOLLOWING_MS after the last watcher left), the cache follows `events$` (an exit carries the
 * exit code; start and remove say the rest) and polls `list` to verify, every second while the stream is
 * down; every new watcher triggers one extra poll (swdd~podman-state-getter-reset-cache~1,
 * swdd~podman-kube-state-getter-reset-cache~1), coalesced with the polls under way, unless news of its
 * containers answers it first (their events, or the agent's own word of the container its create made). Without `events$` it
 * polls every second. A verification that finds a change no event announced takes the stream for stalled
 * and starts it again.
 */
interface CacheOptions {
  /** The run's clock and timers. */
  readonly scheduler: SchedulerLike;
  readonly verifyMs?: number;
  /**
   * Word that comes before the engine's events, applied like them, no health of its own: exits (conmon's
   * exit files), and the agent's own starts of a container in place (a `podman start` that returned).
   */
  readonly early$?: Observable<ContainerEvent>;
  readonly log?: Logger;
  /** --debug: the engine's stage (`podman.cache`) says each change the watchers see and where it came from. */
  readonly trace?: Notes;
  /** Told each time `podman events` is started again within one run of the cache (for the metrics). */
  readonly eventsRestarted?: () => void;
  /** Whose containers the cache follows, as its log and --debug say it. */
  readonly engine: Engine;
  /** Tells that the run is over: a cache its watchers left stops following at once, not KEEP_FOLLOWING_MS later. */
  readonly ended$?: Observable<unknown>;
}

const SILENT: Notes = { enabled: () => false, note: () => undefined };

/** A snapshot as the cache's run makes it, with the container whose event made it (none: a poll's). */
interface Told {
  readonly snapshot: Snapshot;
  readonly event?: string;
}

export function containerCache(list: () => Observable<Container[]>, events$: Observable<ContainerEvent> | undefined, options: CacheOptions): ContainerCache {
  const refresh$ = new Subject<void>();
  // The starts of containers the agent's creates made, told by their watchers as they come (the agent's own word).
  const made$ = new Subject<ContainerEvent>();
  // How many polls this cache started, and whether its event stream is up now (what a new watcher goes by).
  const polls = { started: 0, eventsUp: false, running: 0 };
  const early$ = options.early$ ? merge(options.early$, made$) : made$;
  const told$ = defer(() => cacheSnapshots(list, events$, refresh$, polls, { ...options, early$ })).pipe(
    share({
      connector: () => new ReplaySubject<Told>(1),
      resetOnRefCountZero: () => race(timer(KEEP_FOLLOWING_MS, options.scheduler), options.ended$ ?? NEVER),
    }),
  );
  const watchers = new Watchers(told$);
  return {
    fresh: (ids, made) =>
      new Observable<Snapshot>((subscriber) => {
        const since = polls.started;
        const madeDuringPoll = made !== undefined && polls.running > 0;
        let heard = false;
        const watcher: Watcher = {
          ids,
          // The current snapshot is replayed first: news in it is older than the subscription.
          replayed: true,
          take(s) {
            // Fresh: a poll begun after it came, news of its containers, or the answer of the poll under way when
            // it came with the agent's own word of its start, which that answer has applied on top.
            const news = s.news !== undefined && ids?.includes(s.news) === true;
            if (!(s.poll > since || (!this.replayed && (news || (madeDuringPoll && s.poll === since))))) return false;
            heard = true;
            subscriber.next(s);
            return true;
          },
          error: (err) => subscriber.error(err),
          complete: () => subscriber.complete(),
        };
        watchers.add(watcher);
        watcher.replayed = false;
        // swdd~podman-state-getter-reset-cache~1: a new workload's container is to be in the cache when its watcher
        // reads it. The agent's own word of the start its create made puts it there (news while the stream is up,
        // as Podman's start event would be), so that a burst of creates costs no poll each.
        if (made) made$.next(made);
        // In a burst (a poll under way), a watcher that names its containers gives their events a while to
        // come before it asks for a poll of its own; alone, it asks at once and takes what comes first.
        const asking = (ids && polls.eventsUp && polls.running > 0 ? timer(NEWS_WAIT_MS, options.scheduler) : of(0)).subscribe(() => {
          if (!heard) refresh$.next();
        });
        return () => {
          asking.unsubscribe();
          watchers.delete(watcher);
        };
      }),
  };
}

/** One watcher of the cache: the containers it names (none: all). */
interface Watcher {
  readonly ids?: readonly string[];
  /** While it is added: what it takes then is the snapshot it found, not news. */
  replayed: boolean;
  /** Whether the snapshot was fresh for it (and so given on). */
  take(snapshot: Snapshot): boolean;
  error(err: unknown): void;
  complete(): void;
}

/**
 * The cache's watchers, told its snapshots through one subscription however many there are: a poll's snapshot
 * goes to every watcher, an event's only to those that name its container (and to those that name none, or
 * whose last snapshot showed no containers). A burst of a hundred workloads' events so wakes each one's watcher,
 * not every watcher at every event: the state checker would pass over the others' news anyway.
 */
class Watchers {
  private readonly all = new Set<Watcher>();
  /** Watchers by the containers they name. */
  private readonly byId = new Map<string, Set<Watcher>>();
  /** Watchers that take every event's snapshot: those that name no container, or whose last snapshot showed none. */
  private readonly everyEvent = new Set<Watcher>();
  private subscription?: Subscription;
  /** The latest snapshot of this subscription, what a watcher that comes is given first. */
  private latest?: Snapshot;

  constructor(private readonly told$: Observable<Told>) {}

  add(watcher: Watcher): void {
    this.all.add(watcher);
    this.everyEvent.add(watcher);
    for (const id of watcher.ids ?? []) {
      const named = this.byId.get(id);
      if (named) named.add(watcher);
      else this.byId.set(id, new Set([watcher]));
    }
    // The first watcher starts the cache (its snapshot replayed, if the cache still follows); a later one is given the latest.
    if (this.subscription !== undefined) {
      if (this.latest) this.give(watcher, this.latest);
      return;
    }
    // Held before the cache is subscribed: a watcher added or gone while its replay is told finds it.
    const subscription = new Subscription();
    this.subscription = subscription;
    subscription.add(
      this.told$.subscribe({
        next: (t) => this.tell(t),
        error: (err) => this.end((w) => w.error(err)),
        complete: () => this.end((w) => w.complete()),
      }),
    );
  }

  delete(watcher: Watcher): void {
    if (!this.all.delete(watcher)) return;
    this.everyEvent.delete(watcher);
    for (const id of watcher.ids ?? []) {
      const named = this.byId.get(id);
      named?.delete(watcher);
      if (named?.size === 0) this.byId.delete(id);
    }
    if (this.all.size > 0) return;
    this.subscription?.unsubscribe();
    this.subscription = undefined;
    this.latest = undefined;
  }

  private tell({ snapshot, event }: Told): void {
    this.latest = snapshot;
    // Copied: a watcher told may leave, or bring another, before the next is told.
    const told = event === undefined ? [...this.all] : [...this.everyEvent, ...[...(this.byId.get(event) ?? [])].filter((w) => !this.everyEvent.has(w))];
    for (const watcher of told) if (this.all.has(watcher)) this.give(watcher, snapshot);
  }

  private give(watcher: Watcher, snapshot: Snapshot): void {
    if (!watcher.take(snapshot) || watcher.ids === undefined || !this.all.has(watcher)) return;
    if (snapshot.containers !== undefined) this.everyEvent.delete(watcher);
    else this.everyEvent.add(watcher);
  }

  private end(tell: (watcher: Watcher) => void): void {
    const told = [...this.all];
    this.subscription = undefined;
    this.latest = undefined;
    for (const watcher of told) tell(watcher);
  }
}

/**
 * Events of a container's way up before its start: never news to a watcher, who names its containers only
 * once their create returned (and so started them); a lagging stream's `created` would be older than that.
 */
const BEFORE_START: ReadonlySet<ContainerChange> = new Set(['created', 'initialized']);

/** One run of the cache while it is watched: the reducer (lib/container-view.ts) fed by polls and events. */
function cacheSnapshots(
  list: () => Observable<Container[]>,
  events$: Observable<ContainerEvent> | undefined,
  refresh$: Observable<void>,
  polls: { started: number; eventsUp: boolean; running: number },
  { scheduler, verifyMs = VERIFY_INTERVAL_MS, early$ = EMPTY, log, trace = SILENT, eventsRestarted, engine }: CacheOptions,
): Observable<Told> {
  // The one state: the reducer's. The rest here is timing.
  let view = EMPTY_VIEW;
  const healthy$ = new BehaviorSubject(false);
  const watchingHealth = healthy$.subscribe((up) => (polls.eventsUp = up));
  const restart$ = new Subject<void>();
  // A poll after a second for a container the reducer says is settling (stopped, its exit not told).
  const recheck$ = new Subject<void>();
  const step = (input: ViewInput): Told[] => {
    const next = stepView(view, input);
    if (next.settling) recheck$.next();
    if (next.snapshot && trace.enabled(engine.stage)) traceChanges(trace, engine, view, next, input);
    view = next.view;
    if (next.missedEvent) {
      trace.note(engine.stage, 'The poll found a change no event announced: the event stream is taken for stalled and started again.');
      restart$.next();
    }
    if (!next.snapshot) return [];
    if (input.kind !== 'event') return [{ snapshot: next.snapshot }];
    const news = healthy$.value && !BEFORE_START.has(input.event.change);
    return [{ snapshot: news ? { ...next.snapshot, news: input.event.id } : next.snapshot, event: input.event.id }];
  };
  const poll$ = defer(() => {
    const poll = ++polls.started;
    polls.running += 1;
    const result$ = list().pipe(
      finalize(() => (polls.running -= 1)),
      map((containers): ViewInput => ({ kind: 'polled', poll, containers, eventsHealthy: healthy$.value, at: scheduler.now() })),
      catchError((err: unknown) => of<ViewInput>({ kind: 'pollFailed', poll, error: errorText(err), at: scheduler.now() })),
    );
    return concat(of<ViewInput>({ kind: 'pollStarted' }), result$).pipe(spread(step));
  });
  const ticks$ = events$
    ? healthy$.pipe(
        distinctUntilChanged(),
        switchMap((healthy, i) => periodic(healthy ? verifyMs : CACHE_INTERVAL_MS, i === 0, scheduler)),
      )
    : periodic(CACHE_INTERVAL_MS, true, scheduler);
  const evented$ = events$
    ? followEvents(events$, healthy$, restart$, { scheduler, log, trace, eventsRestarted, engine }).pipe(
        spread((event) => step({ kind: 'event', event, at: scheduler.now() })),
      )
    : EMPTY;
  const told$ = early$.pipe(spread((event) => step({ kind: 'event', event, early: true, at: scheduler.now() })));
  return merge(evented$, told$, oneAtATime(merge(ticks$, refresh$, recheck$.pipe(debounceTime(CACHE_INTERVAL_MS, scheduler))), poll$)).pipe(
    finalize(() => {
      watchingHealth.unsubscribe();
      polls.eventsUp = false;
    }),
  );
}

/** Every `period` ms, the first after a period (`wait`) or at once: a change of the stream's health is verified at once. */
const periodic = (period: number, wait: boolean, scheduler: SchedulerLike) => timer(wait ? period : 0, period, scheduler);

/** Runs `work$` on each trigger, one at a time; triggers that come while it runs are served by one more run right after it. */
function oneAtATime<T>(triggers$: Observable<unknown>, work$: Observable<T>): Observable<T> {
  let pending = false;
  const run$ = defer(() => {
    pending = false;
    return work$;
  });
  return triggers$.pipe(
    tap(() => (pending = true)),
    exhaustMap(() => run$.pipe(repeat({ delay: () => (pending ? of(0) : EMPTY) }))),
  );
}

/**
 * The engine's events while the stream is up (`healthy$` says when), started again a while after it ended,
 * failed (logged with its cause) or was taken for stalled (`restart$`).
 */
function followEvents(
  events$: Observable<ContainerEvent>,
  healthy$: BehaviorSubject<boolean>,
  restart$: Observable<void>,
  { scheduler, log, trace, eventsRestarted, engine }: Pick<CacheOptions, 'scheduler' | 'log' | 'eventsRestarted'> & { trace: Notes; engine: Engine },
): Observable<ContainerEvent> {
  let starts = 0;
  return defer(() => {
    if (starts++ > 0) eventsRestarted?.();
    trace.note(engine.stage, starts === 1 ? `Following ${engine.name}'s events.` : `Following ${engine.name}'s events again (start ${starts}).`);
    healthy$.next(true);
    return events$.pipe(
      takeUntil(restart$),
      catchError((err: unknown) => {
        log?.warn(`${engine.name}'s event stream failed: ${errorText(err)}; polling every second until it is back.`);
        return EMPTY;
      }),
      finalize(() => {
        trace.note(engine.stage, `${engine.name}'s event stream ended.`);
        healthy$.next(false);
      }),
    );
  }).pipe(repeat({ delay: () => timer(EVENTS_RESTART_MS, scheduler) }));
}

/** --debug: a line per container whose state the watchers now see changed, with what told it. */
function traceChanges(trace: Notes, engine: Engine, before: ContainerView, next: ViewStep, input: ViewInput): void {
  if (input.kind === 'pollFailed') {
    trace.note(engine.stage, `Poll ${input.poll} failed: ${input.error}`);
    return;
  }
  const early = input.kind === 'event' && input.early ? (input.event.change === 'started' ? "the agent's own start" : "conmon's exit file") : undefined;
  const source = input.kind !== 'event' ? 'poll' : (early ?? `${engine.name}'s ${input.event.change} event`);
  for (const line of changesBetween(before, next.view)) trace.note(engine.stage, `${line} (${source})`);
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));
