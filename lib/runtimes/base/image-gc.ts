// Images that do not pile up: the agent records the images it pulled itself (in its folder, across restarts),
// removes those no container uses once they are older than a minimum age, and holds a pull back while the
// image store's filesystem is fuller than the high threshold even after that. A user's images, and any image
// a container (of any agent or user) uses, are never removed; a removal Podman or nerdctl refuses is left.
import { readFileSync, renameSync, statfsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { EMPTY, type Observable, catchError, concat, defer, from, ignoreElements, mergeMap, of, reduce, switchMap, throwError } from 'rxjs';
import type { ImagePull } from './images.js';
import type { Container } from '../../ports.js';
import type { ImageGcSettings } from '../../config.js';
import type { RuntimeContext } from './module.js';

/** How many images the record holds at most (the oldest are forgotten: never removed, never wrongly). */
const MAX_RECORDED = 10_000;
/**
 * How long an image a workload waits for (pulled ahead, its create not done yet) is kept without a container: a
 * workload deleted while it waits tells the collector nothing, so the mark ends by itself.
 */
const WANTED_MS = 60 * 60_000;

/** What the collector asks of an engine, for one storage (the CLI's general options, a containerd's namespace). */
export interface ImageEngine {
  /** Its name in the record and in messages (`podman`, `containerd`). */
  readonly name: string;
  /** The references and ids of the images every container of the storage uses, stopped ones too. */
  imagesInUse(storage: readonly string[]): Observable<ReadonlySet<string>>;
  /** Removes the image unless a container uses it (the engine refuses then). */
  remove(storage: readonly string[], image: string): Observable<unknown>;
  /** The folder the storage keeps its images in (its filesystem is the one watched). */
  storeFolder(storage: readonly string[]): Observable<string>;
}

interface Recorded {
  readonly engine: string;
  readonly storage: readonly string[];
  readonly image: string;
  readonly pulledAt: number;
}

/** The images the agent pulled with an engine, kept in `<folder>/images.<engine>.json` (written whole, then renamed into place). */
export class ImageRecord {
  private images: Recorded[] = [];
  private readonly file?: string;

  constructor(folder: string | undefined, engine: string) {
    this.file = folder && path.join(folder, `images.${engine}.json`);
    if (!this.file) return;
    try {
      const read = JSON.parse(readFileSync(this.file, 'utf8')) as { images?: unknown };
      this.images = (Array.isArray(read.images) ? read.images : []).filter(isRecorded).slice(-MAX_RECORDED);
    } catch {
      // None yet, or not readable: nothing is known to be the agent's.
    }
  }

  add(engine: string, storage: readonly string[], image: string, at: number): void {
    this.images = [...this.images.filter((r) => !same(r, engine, storage, image)), { engine, storage, image, pulledAt: at }].slice(-MAX_RECORDED);
    this.save();
  }

  delete(engine: string, storage: readonly string[], image: string): void {
    this.images = this.images.filter((r) => !same(r, engine, storage, image));
    this.save();
  }

  of(engine: string): readonly Recorded[] {
    return this.images.filter((r) => r.engine === engine);
  }

  private save(): void {
    if (!this.file) return;
    try {
      writeFileSync(`${this.file}.new`, JSON.stringify({ images: this.images }), { mode: 0o600 });
      renameSync(`${this.file}.new`, this.file);
    } catch {
      // A full disk: the record is written again at its next change.
    }
  }
}

const wantedKey = ({ storage, image }: { readonly storage: readonly string[]; readonly image: string }) => `${storage.join('\0')}\0\0${image}`;

const same = (r: Recorded, engine: string, storage: readonly string[], image: string) =>
  r.engine === engine && r.image === image && r.storage.join('\0') === storage.join('\0');

function isRecorded(value: unknown): value is Recorded {
  const r = value as Recorded;
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof r.engine === 'string' &&
    typeof r.image === 'string' &&
    typeof r.pulledAt === 'number' &&
    Array.isArray(r.storage) &&
    r.storage.every((s) => typeof s === 'string')
  );
}

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
  private timer?: NodeJS.Timeout;
  private collecting = false;
  /** Images a workload of this agent names and waits for (by storage and image), and since when. */
  private readonly wanted = new Map<string, number>();

  constructor(
    private readonly engine: ImageEngine,
    private readonly record: ImageRecord,
    private readonly settings: ImageGcSettings,
    private readonly observer: ImageGcObserver = {},
    private readonly now: () => number = Date.now,
  ) {
    if (record.of(engine.name).length > 0) this.schedule();
  }

  /** A workload names `pull`'s image and its create is still to come: no collection takes it meanwhile. */
  want(pull: ImagePull): void {
    this.wanted.delete(wantedKey(pull));
    this.wanted.set(wantedKey(pull), this.now());
    // Bounded: the oldest marks go first.
    if (this.wanted.size > MAX_RECORDED) this.wanted.delete(this.wanted.keys().next().value!);
  }

  /** The create that wanted `pull`'s image is done: its container keeps the image from now on. */
  created(pull: ImagePull): void {
    this.wanted.delete(wantedKey(pull));
  }

  private isWanted(storage: readonly string[], image: string): boolean {
    const since = this.wanted.get(wantedKey({ storage, image }));
    return since !== undefined && this.now() - since < WANTED_MS;
  }

  /** An image this pull fetched that was not there before is the agent's. */
  pulled(pull: ImagePull): void {
    this.record.add(this.engine.name, pull.storage, pull.image, this.now());
    this.observer.note?.(`${this.engine.name}: recorded ${pull.image} as pulled by the agent`);
    this.schedule();
  }

  /** Collects now and then while the record holds images of this engine (half the minimum age, 1 s to 1 min); no timer without. */
  private schedule(): void {
    if (this.timer) return;
    this.timer = setInterval(
      () => {
        if (this.record.of(this.engine.name).length === 0) {
          clearInterval(this.timer);
          this.timer = undefined;
        } else if (!this.collecting) {
          this.collecting = true;
          this.collect().subscribe({ complete: () => (this.collecting = false), error: () => (this.collecting = false) });
        }
      },
      Math.min(60_000, Math.max(1000, this.settings.minAgeMs / 2)),
    );
    this.timer.unref();
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
      switchMap((inUse) => from(oldEnough.filter((r) => !inUse.has(r.image) && !this.isWanted(storage, r.image)))),
      mergeMap(
        (r) =>
          concat(
            this.engine.remove(storage, r.image).pipe(ignoreElements()),
            defer(() => {
              this.record.delete(this.engine.name, storage, r.image);
              this.observer.removed?.(this.engine.name);
              this.observer.note?.(`${this.engine.name}: removed ${r.image} (pulled by the agent, used by no container)`);
              return of(1);
            }),
          ).pipe(
            catchError((err: unknown) => {
              // One that is gone already is forgotten; one the engine keeps (a container came to use it) is tried later.
              if (/image not known|no such image|not found/i.test((err as Error).message)) this.record.delete(this.engine.name, storage, r.image);
              this.observer.note?.(`${this.engine.name}: kept ${r.image}: ${(err as Error).message}`);
              return of(0);
            }),
          ),
        1,
      ),
      reduce((sum, n) => sum + n, 0),
      catchError((err: unknown) => {
        this.observer.note?.(`${this.engine.name}: no collection: ${(err as Error).message}`);
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
export function imageCollector({ config, note, images }: RuntimeContext, engine: ImageEngine): ImageCollector | undefined {
  if (!config.imageGc) return undefined;
  return new ImageCollector(engine, new ImageRecord(config.folder, engine.name), config.imageGc, {
    note: (text) => note('images', text),
    removed: (name) => images?.(name, { removed: 1 }),
    used: (name, usedRatio) => images?.(name, { usedRatio }),
  });
}
