// What the agent knows of the units it manages, kept by systemd's own news of them and checked now and then by
// `systemctl show`: one bus stream and one show for all units, however many are watched; while the stream is
// down, the show polls them instead.
import {
  BehaviorSubject,
  EMPTY,
  type Observable,
  type SchedulerLike,
  asyncScheduler,
  catchError,
  defer,
  distinctUntilChanged,
  exhaustMap,
  filter,
  finalize,
  map,
  merge,
  mergeMap,
  retry,
  scan,
  share,
  switchMap,
  tap,
  timer,
} from 'rxjs';
import type { BusNews } from './events.js';
import { unitPath } from './dbus-wire.js';
import { EMPTY_VIEW, type UnitProps, learn } from './unit-state.js';

export interface UnitSource {
  /** systemd's news of the units whose object paths `wanted` takes; undefined: this manager is polled only. */
  readonly news?: (wanted: (path: string) => boolean) => Observable<BusNews>;
  /** What systemd shows of `units` now, by unit name. */
  show(units: readonly string[]): Observable<ReadonlyMap<string, UnitProps>>;
}

export interface UnitWatchTiming {
  /** How often every watched unit is shown while the news come (a check that nothing was missed). */
  readonly verifyMs: number;
  /** How often they are shown while there is no news stream (the released proposal's poll). */
  readonly pollMs: number;
  /** The first wait before the news stream is opened again; it doubles up to `maxRetryMs`. */
  readonly retryMs: number;
  readonly maxRetryMs: number;
}

export const UNIT_WATCH_TIMING: UnitWatchTiming = { verifyMs: 30_000, pollMs: 500, retryMs: 1000, maxRetryMs: 60_000 };

type Learnt = { readonly props: UnitProps; readonly at: number };

export class UnitWatch {
  /** How many watchers each unit has, and the object path of each watched unit. */
  private readonly watched = new Map<string, number>();
  private readonly paths = new Set<string>();
  /** The order of what the agent learns: a show does not undo news heard after it was asked. */
  private step = 0;
  private readonly busUp$ = new BehaviorSubject(false);
  private readonly news$: Observable<BusNews & { readonly at: number }>;
  private readonly polls$: Observable<{ readonly units: ReadonlyMap<string, UnitProps>; readonly at: number }>;

  constructor(
    private readonly source: UnitSource,
    timing: UnitWatchTiming = UNIT_WATCH_TIMING,
    scheduler: SchedulerLike = asyncScheduler,
  ) {
    this.news$ = source.news
      ? defer(() => source.news!((path) => this.paths.has(path))).pipe(
          tap({ next: (news) => news.kind === 'up' && this.busUp$.next(true), error: () => this.busUp$.next(false) }),
          retry({ delay: (_, n) => timer(Math.min(timing.retryMs * 2 ** (n - 1), timing.maxRetryMs), scheduler), resetOnSuccess: true }),
          finalize(() => this.busUp$.next(false)),
          map((news) => ({ ...news, at: ++this.step })),
          share(),
        )
      : EMPTY;
    // While the news come, every unit once at once (what changed while they did not) and then rarely; else often.
    this.polls$ = this.busUp$.pipe(
      distinctUntilChanged(),
      switchMap((up) => (up ? timer(0, timing.verifyMs, scheduler) : timer(timing.pollMs, timing.pollMs, scheduler))),
      filter(() => this.watched.size > 0),
      exhaustMap(() => this.showAll([...this.watched.keys()])),
      share(),
    );
  }

  /** The unit's properties, each time the agent learns more of them; the first from a show. */
  watch(unit: string): Observable<UnitProps> {
    return defer(() => {
      this.watched.set(unit, (this.watched.get(unit) ?? 0) + 1);
      const path = unitPath(unit);
      this.paths.add(path);
      const updates$: Observable<Learnt> = merge(
        this.news$.pipe(
          filter((news) => news.kind === 'unit' && news.path === path),
          mergeMap((news) => (news.kind === 'unit' && news.stale ? this.showAll([unit]).pipe(map((shown) => this.of(shown, unit))) : [news as Learnt])),
        ),
        this.polls$.pipe(map((shown) => this.of(shown, unit))),
        this.showAll([unit]).pipe(map((shown) => this.of(shown, unit))),
      );
      return updates$.pipe(
        filter((learnt) => Object.keys(learnt.props).length > 0),
        scan((view, learnt) => learn(view, learnt.props, learnt.at), EMPTY_VIEW),
        map((view) => view.props),
        finalize(() => {
          const left = (this.watched.get(unit) ?? 1) - 1;
          if (left > 0) this.watched.set(unit, left);
          else {
            this.watched.delete(unit);
            this.paths.delete(path);
          }
        }),
      );
    });
  }

  /** The units as systemd shows them now; a show that fails is passed over (the next one comes). */
  private showAll(units: readonly string[]): Observable<{ readonly units: ReadonlyMap<string, UnitProps>; readonly at: number }> {
    return defer(() => {
      const at = ++this.step;
      return this.source.show(units).pipe(
        map((shown) => ({ units: shown, at })),
        catchError(() => EMPTY),
      );
    });
  }

  private of(shown: { readonly units: ReadonlyMap<string, UnitProps>; readonly at: number }, unit: string): Learnt {
    return { props: shown.units.get(unit) ?? {}, at: shown.at };
  }
}
