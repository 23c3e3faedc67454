// Images that do not pile up: the agent records the images it pulled itself (by the image each reference named
// when it pulled it, in its folder, across restarts), removes those no container uses once they are older than a
// minimum age, and holds every pull back while the image store's filesystem is fuller than the high threshold
// even after that. Only the agent's own pull makes an image the agent's: one its pull found there, one another
// pull fetched at the same moment (the engine's log of pulls tells), and one a create pulled by itself are not
// recorded. An image is removed only while it is still the agent's: its reference names the image the agent
// pulled and no other name was given to it. A user's images (one tagged anew under a reference the agent once
// pulled included), and any image a container (of any agent or user) uses, are never removed; a removal Podman
// or nerdctl refuses is left. An image a workload waits for that the agent did not pull is held by a name of its
// own meanwhile (./image-holds.ts), so that another agent of the same store keeps it too.
import { statfsSync } from 'node:fs';
import {
  AsyncSubject,
  EMPTY,
  type Observable,
  type SchedulerLike,
  Subscription,
  asyncScheduler,
  catchError,
  concat,
  defer,
  exhaustMap,
  forkJoin,
  from,
  ignoreElements,
  interval,
  mergeMap,
  of,
  reduce,
  switchMap,
  takeWhile,
  tap,
  throwError,
} from 'rxjs';
import type { ImagePull } from './images.js';
import type { Container } from '../../ports.js';
import type { ImageGcSettings } from '../../config.js';
import type { RuntimeContext } from '../base/module.js';
import { ImageRecord, type Recorded } from './image-record.js';
import { ImageHolds, type NamingEngine, digestOf, isHold } from './image-holds.js';

/** The image a reference names: its id and every name it has (the reference among them). */
export interface ImageNames {
  readonly id: string;
  readonly names: readonly string[];
}

/** What the collector asks of an engine, for one storage (the CLI's general options, a containerd's namespace). */
export interface ImageEngine extends NamingEngine {
  /** The references and ids of the images every container of the storage uses, stopped ones too. */
  imagesInUse(storage: readonly string[]): Observable<ReadonlySet<string>>;
  /** The image `image` names now; undefined when it names none. */
  describe(storage: readonly string[], image: string): Observable<ImageNames | undefined>;
  /** Removes the image `id`, named `image` alone, unless a container uses it (the engine refuses then). */
  remove(storage: readonly string[], image: string, id: string): Observable<unknown>;
  /** The folder the storage keeps its images in (its filesystem is the one watched). */
  storeFolder(storage: readonly string[]): Observable<string>;
  /**
   * How many pulls of `image` the engine's log has since `sinceMs` (wall clock), the agent's own among them; an
   * engine without such a log has none.
   */
  pullsSince?(storage: readonly string[], image: string, sinceMs: number): Observable<number>;
}

/** What the agent's own pull of an image told: when the agent found it missing, and the id the pull printed, if any. */
export interface PullReport {
  readonly since: number;
  readonly printed?: string;
}

/** Why a recorded image is no longer the agent's to remove, or undefined while it is. */
function notOurs(r: Recorded, now: ImageNames | undefined): string | undefined {
  if (!now) return 'it is gone';
  if (now.id !== r.id) return `${r.image} names another image now (${now.id})`;
  const others = now.names.filter((name) => name !== r.image && !isHold(name));
  return others.length > 0 ? `it has other names too (${others.join(', ')})` : undefined;
}

/** The image id in what a pull printed last, if it printed one (Podman's `pull --quiet`; nerdctl's prints none). */
const printedId = (printed: string | undefined) => (printed && /^(sha256:)?[0-9a-f]{12,64}$/.test(printed) ? printed.replace(/^sha256:/, '') : undefined);

/** Whether an id a pull printed is the image's id (either may be the other's short form). */
const sameImage = (printed: string, id: string) => {
  const bare = id.replace(/^sha256:/, '');
  return bare.startsWith(printed) || printed.startsWith(bare);
};

/** The references and ids of the images `containers` were made of. */
export const imagesUsedBy = (containers: readonly Container[]): ReadonlySet<string> =>
  new Set(containers.flatMap((c) => [c.image, c.imageId].filter((x): x is string => x !== undefined && x !== '')));

/** How full a filesystem is, in % of what an unprivileged user may use (as `df` shows it); undefined when it cannot be read. */
export function usedPercent(folder: string): number | undefined {
  try {
    const s = statfsSync(folder);
    const used = s.blocks - s.bfree;
    return used + s.bavail === 0 ? undefined : (100 * used) / (used + s.bavail);
  } catch {
    return undefined;
  }
}

/** Told of each decision (`--debug=images`) and of each removal (the metrics). */
export interface ImageGcObserver {
  readonly note?: (text: string) => void;
  readonly removed?: (engine: string) => void;
  readonly used?: (engine: string, ratio: number) => void;
}

export class ImageCollector {
  private timer?: Subscription;
  /** What keeps the images this agent's workloads wait for. */
  private readonly holds: ImageHolds;

  constructor(
    private readonly engine: ImageEngine,
    private readonly record: ImageRecord,
    private readonly settings: ImageGcSettings,
    private readonly observer: ImageGcObserver = {},
    /** Its clock and its timer (virtual in specs). */
    private readonly scheduler: SchedulerLike = asyncScheduler,
    /** Where its timer and its recordings under way are held: the run lets go of them when it ends. */
    private readonly held: Subscription = new Subscription(),
    /** What tells this agent's hold names from another's (the same across its restarts). */
    holder = 'agent',
  ) {
    this.holds = new ImageHolds(engine, (pull) => this.pulledByAgent(pull), scheduler, held, holder, observer.note);
    if (record.of(engine.name).length > 0) this.schedule();
  }

  /** A workload names `pull`'s image and its create is still to come: no collection takes it meanwhile. */
  want(pull: ImagePull): void {
    this.holds.want(pull);
  }

  /** The create that wanted `pull`'s image is done: its container keeps the image from now on. */
  created(pull: ImagePull): void {
    this.holds.created(pull);
  }

  /**
   * A workload of this agent waits for `pull`'s image, which is there: unless the agent pulled it, it gets a hold
   * name until the create, so that the collector of another agent that pulled it keeps it meanwhile.
   */
  hold(pull: ImagePull): Observable<never> {
    return this.holds.hold(pull);
  }

  private pulledByAgent(pull: ImagePull): boolean {
    return this.record.of(this.engine.name).some((r) => r.image === pull.image && r.storage.join('\0') === pull.storage.join('\0'));
  }

  /**
   * An image the agent's own pull fetched that was not there before is the agent's: recorded as the image its
   * reference names now, when that is the image the pull printed and no other pull of it went on since the agent
   * found it missing (`report`). The recording is the collector's once subscribed: a caller that lets go
   * meanwhile (its work was ended) does not cut it, else the image would be nobody's and stay for good.
   */
  pulled(pull: ImagePull, report: PullReport): Observable<never> {
    return defer(() => {
      const recorded = new AsyncSubject<never>();
      this.held.add(this.recording(pull, report).subscribe(recorded));
      return recorded;
    });
  }

  /** The moment a pull's check for its image begins, as the engine's log of pulls reads it. */
  now(): number {
    return this.scheduler.now();
  }

  private recording(pull: ImagePull, report: PullReport): Observable<never> {
    const printed = printedId(report.printed);
    const pulls$ = this.engine.pullsSince?.(pull.storage, pull.image, report.since) ?? of(0);
    return forkJoin([this.engine.describe(pull.storage, pull.image), pulls$]).pipe(
      tap(([now, pulls]) => {
        if (!now) return;
        const notAlone =
          printed !== undefined && !sameImage(printed, now.id)
            ? `it names ${now.id}, not the image the pull printed (${printed})`
            : pulls > 1
              ? `${pulls} pulls of it since the agent found it missing: another pulled it too`
              : undefined;
        if (notAlone) return void this.observer.note?.(`${this.engine.name}: ${pull.image} not recorded: ${notAlone}`);
        this.record.add({ engine: this.engine.name, storage: pull.storage, image: pull.image, id: now.id }, this.now());
        this.observer.note?.(`${this.engine.name}: recorded ${pull.image} (${now.id}) as pulled by the agent`);
        this.schedule();
      }),
      ignoreElements(),
      catchError((err: unknown) => {
        this.observer.note?.(`${this.engine.name}: ${pull.image} not recorded: ${(err as Error).message}`);
        return EMPTY;
      }),
    );
  }

  /**
   * Collects now and then while the record holds images of this engine (half the minimum age, 1 s to 1 min), one
   * collection at a time; no timer without.
   */
  private schedule(): void {
    if (this.timer && !this.timer.closed) return;
    const timer = interval(Math.min(60_000, Math.max(1000, this.settings.minAgeMs / 2)), this.scheduler)
      .pipe(
        takeWhile(() => this.record.of(this.engine.name).length > 0),
        exhaustMap(() => this.collect().pipe(catchError(() => EMPTY))),
      )
      .subscribe();
    this.timer = timer;
    this.held.add(timer);
  }

  /**
   * Removes the agent's images of every storage it pulled into that no container uses and that are older than
   * the minimum age, oldest first, one at a time; emits how many went.
   */
  collect(): Observable<number> {
    return defer(() => {
      const storages = new Map(this.record.of(this.engine.name).map((r) => [r.storage.join('\0'), r.storage]));
      return from(storages.values()).pipe(
        mergeMap((storage) => this.collectIn(storage), 1),
        reduce((sum, n) => sum + n, 0),
      );
    });
  }

  /** Removes what may go in `storage`, then tells how full its filesystem is. */
  private collectIn(storage: readonly string[]): Observable<number> {
    const usage$ = this.engine.storeFolder(storage).pipe(
      mergeMap((folder) => {
        const used = usedPercent(folder);
        if (used !== undefined) this.observer.used?.(this.engine.name, used / 100);
        return EMPTY;
      }),
      catchError(() => EMPTY),
    );
    return concat(this.removeIn(storage), usage$);
  }

  private removeIn(storage: readonly string[]): Observable<number> {
    const key = storage.join('\0');
    const oldEnough = this.record
      .of(this.engine.name)
      .filter((r) => r.storage.join('\0') === key && this.now() - r.pulledAt >= this.settings.minAgeMs)
      .sort((a, b) => a.pulledAt - b.pulledAt);
    if (oldEnough.length === 0) return of(0);
    return this.engine.imagesInUse(storage).pipe(
      switchMap((inUse) => from(oldEnough.filter((r) => !inUse.has(r.image) && !inUse.has(r.id) && !this.holds.isWanted(storage, r.image)))),
      mergeMap((r) => this.removeOne(r), 1),
      reduce((sum, n) => sum + n, 0),
      catchError((err: unknown) => {
        this.observer.note?.(`${this.engine.name}: no collection: ${(err as Error).message}`);
        return of(0);
      }),
    );
  }

  /** Removes a recorded image while it is still the agent's; one that is not any more is forgotten. Emits 1 when it went. */
  private removeOne(r: Recorded): Observable<number> {
    const name = this.engine.name;
    const forget = (why: string) => {
      this.record.delete(r);
      this.observer.note?.(`${name}: forgot ${r.image}: ${why}`);
      return of(0);
    };
    return this.engine.describe(r.storage, r.image).pipe(
      mergeMap((now) => {
        const why = notOurs(r, now);
        if (why) return forget(why);
        if (now?.names.some(isHold)) {
          this.observer.note?.(`${name}: kept ${r.image}: a workload of another agent waits for it`);
          return of(0);
        }
        return concat(
          this.engine.remove(r.storage, r.image, r.id).pipe(ignoreElements()),
          defer(() => {
            this.record.delete(r);
            this.observer.removed?.(name);
            this.observer.note?.(`${name}: removed ${r.image} (pulled by the agent, used by no container)`);
            return of(1);
          }),
        );
      }),
      catchError((err: unknown) => {
        // One that is gone already is forgotten; one the engine keeps (a container came to use it) is tried later.
        if (/image not known|no such image|not found/i.test((err as Error).message)) return forget('it is gone');
        this.observer.note?.(`${name}: kept ${r.image}: ${(err as Error).message}`);
        return of(0);
      }),
    );
  }

  /**
   * Completes when `pull` may go ahead: its storage's filesystem is below the high threshold, after a collection
   * if it was not. Fails with the reason (a pull's failure, reported as one) when it is still above.
   */
  room(pull: ImagePull): Observable<never> {
    return this.engine.storeFolder(pull.storage).pipe(
      catchError(() => of(undefined)),
      switchMap((folder) => {
        const before = folder === undefined ? undefined : usedPercent(folder);
        if (folder === undefined || before === undefined) return EMPTY;
        this.observer.used?.(this.engine.name, before / 100);
        if (before < this.settings.high) return EMPTY;
        this.observer.note?.(`${this.engine.name}: ${folder} is ${before.toFixed(0)} % full before a pull of ${pull.image}: collecting`);
        return this.collect().pipe(
          switchMap(() => {
            const after = usedPercent(folder) ?? 0;
            this.observer.used?.(this.engine.name, after / 100);
            return after < this.settings.high
              ? EMPTY
              : throwError(
                  () =>
                    new Error(
                      `Waiting for disk space: the image store's filesystem (${folder}) is ${after.toFixed(0)} % full, above ${this.settings.high} % (image_gc.high)`,
                    ),
                );
          }),
        );
      }),
      ignoreElements(),
    );
  }
}

/** The collector of a module's engine, told to --debug (`images`) and the metrics; none when `image_gc = false`. */
export function imageCollector({ config, trace, images, log, scheduler, held }: RuntimeContext, engine: ImageEngine): ImageCollector | undefined {
  if (!config.imageGc) return undefined;
  const record = new ImageRecord(config.folder, engine.name, (text) => log.warn(text));
  const observer: ImageGcObserver = {
    note: (text) => trace.note('images', text),
    removed: (name) => images?.(name, { removed: 1 }),
    used: (name, usedRatio) => images?.(name, { usedRatio }),
  };
  return new ImageCollector(engine, record, config.imageGc, observer, scheduler, held, `agent-${digestOf(config.folder ?? '')}`);
}
