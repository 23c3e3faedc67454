// Images had before they are needed (an update's new images while the old instance runs, a waiting
// workload's while it waits), for the runtimes on a container CLI: the CLI's query whether an image is
// there, then its pull when it is not or the workload asks for a pull every time. One pull per image and
// options at a time, shared by all who need it; at most MAX_PULLS at once; each with its own deadline.
import { EMPTY, type Observable, catchError, concat, defer, finalize, ignoreElements, map, merge, mergeMap, of, share, tap, throwError } from 'rxjs';
import type { ImageCollector } from './image-gc.js';
import { type ImagePull, alreadyThere } from './images.js';
import type { WorkloadSpec } from '../../workload.js';
import { lastWords } from '../../cli-words.js';
import { type Call, type CallKind, CliError } from '../base/cli.js';
import { Slots } from '../base/slots.js';
import { DEFAULT_MAX_CREATES } from '../../defaults.js';

/** Pulls from one registry that run at once; more wait for one to end (a registry that stalls holds up no other). */
export const MAX_PULLS = 2;
/** How long a pull may take: an image of hundreds of MiB over a slow link. */
export const PULL_DEADLINE_MS = 30 * 60_000;
/** How long a pull may go reading less than 4 KiB before it is ended (containerd's CRI: 5 min without progress). */
export const PULL_STALL_MS = 5 * 60_000;
/** How long the pulled layers may take to reach the disk. */
export const FLUSH_DEADLINE_MS = 60_000;

/** What an engine's client does for its pulls (each builds its own CLI's words). */
export interface PullEngine {
  /** The pull, as the workload's options ask; it prints what it pulled last. */
  pull(pull: ImagePull, call: Pick<Call, 'deadlineMs' | 'stallMs'>): Observable<string>;
  /** Whether a pull's image is there (false, not an error, when it is not). */
  present(pull: ImagePull): Observable<boolean>;
  /** What the pulls left in the page cache written to disk (`sync`), within `deadlineMs`. */
  flush(deadlineMs: number): Observable<unknown>;
  /** How long a call of `kind` may take. */
  deadlineOf(kind: CallKind): number;
}

export class ImagePulls {
  private readonly inFlight = new Map<string, Observable<string>>();
  /** Checks of whether an image is there, under way: a burst of creates of one image asks the engine once. */
  private readonly checking = new Map<string, Observable<{ readonly there: boolean; readonly since: number }>>();
  /** A registry's slots (by the host of the image's reference), made when it is first pulled from. */
  private readonly slots = new Map<string, Slots>();

  /**
   * `flush` writes what the pull left in the page cache to disk (`sync`) before the pull counts as done, so
   * while the old instance still runs: neither CLI syncs the layers it pulls, so a power cut just after an
   * update could leave neither image whole; and a container started on layers still being written back
   * starts slower (measured: 160–185 ms for a `podman run` just after a pull of 40 MiB, 130–140 ms after a sync).
   */
  private readonly deadlineMs: number;
  private readonly stallMs: number;
  private readonly gc?: ImageCollector;
  /** The creates of the engine that may run at once. */
  private readonly creates: Slots;

  constructor(
    private readonly engine: PullEngine,
    options: {
      readonly deadlineMs?: number;
      readonly stallMs?: number;
      /** Records the images the agent pulls, and holds a pull back while the disk is full (agent config `image_gc`). */
      readonly gc?: ImageCollector;
      /** How many creates of the engine run at once. */
      readonly maxCreates?: number;
    } = {},
  ) {
    this.deadlineMs = options.deadlineMs ?? PULL_DEADLINE_MS;
    this.stallMs = options.stallMs ?? PULL_STALL_MS;
    this.gc = options.gc;
    this.creates = new Slots(options.maxCreates ?? DEFAULT_MAX_CREATES);
  }

  private slotsOf(image: string): Slots {
    const registry = registryOf(image);
    let slots = this.slots.get(registry);
    if (!slots) {
      slots = new Slots(MAX_PULLS);
      this.slots.set(registry, slots);
    }
    return slots;
  }

  /**
   * The images an update to `next` has to fetch before its old instance stops, read by `pullsOf` from the configs
   * alone: none when their policy is never, when `current`, of the same runtime, runs them from the same storage, or
   * when `next`'s config cannot be read (its create reports that). The one decision of what to pull ahead, pure.
   */
  toFetch(pullsOf: (spec: WorkloadSpec) => readonly ImagePull[], next: WorkloadSpec, current?: WorkloadSpec): string[] {
    return this.wanted(pullsOf, next, current).map((pull) => pull.image);
  }

  /**
   * Has `images` of `spec` on the node, all at once: what `toFetch` chose, fetched. Nothing happens, the collector
   * told included, until it is subscribed.
   */
  fetch(pullsOf: (spec: WorkloadSpec) => readonly ImagePull[], spec: WorkloadSpec, images: readonly string[]): Observable<string> {
    return defer(() => {
      const pulls = this.wanted(pullsOf, spec).filter((pull) => images.includes(pull.image));
      // Until its create, a pulled-ahead image is the waiting workload's, whatever the collector sees of containers;
      // one it did not pull is held by a name meanwhile, for another agent's collector to see.
      for (const pull of pulls) this.gc?.want(pull);
      return merge(...pulls.map((pull) => concat(this.ensure(pull), this.gc?.hold(pull) ?? EMPTY)));
    });
  }

  private wanted(pullsOf: (spec: WorkloadSpec) => readonly ImagePull[], next: WorkloadSpec, current?: WorkloadSpec): ImagePull[] {
    const read = (spec: WorkloadSpec): readonly ImagePull[] => {
      try {
        return pullsOf(spec);
      } catch {
        return [];
      }
    };
    const had = current?.runtime === next.runtime ? read(current) : [];
    // No reference begins with '-': the CLI would take such an "image" for an option; its create is left to refuse it.
    return read(next).filter((pull) => pull.policy !== 'never' && !pull.image.startsWith('-') && !alreadyThere(pull, had));
  }

  /**
   * Completes when the image is there (pulled if need be); fails with the CLI's reason when it cannot be pulled.
   * When its registry's slots are all taken it says so first: the pull waits for one.
   */
  ensure(pull: ImagePull): Observable<string> {
    if (pull.policy === 'never') return EMPTY;
    const key = pull.args.join('\0');
    return defer(() => {
      let shared = this.inFlight.get(key);
      if (!shared) {
        const slots = this.slotsOf(pull.image);
        const waiting = `Waiting for a pull slot: ${MAX_PULLS} pulls from ${registryOf(pull.image)} are under way`;
        /** The last line the pull printed: the id of what it pulled (Podman's `pull --quiet`). */
        let printed: string | undefined;
        const pull$ = concat(
          defer(() => (slots.full ? of(waiting) : EMPTY)),
          slots.run(
            this.engine.pull(pull, { deadlineMs: this.deadlineMs, stallMs: this.stallMs }).pipe(
              tap((stdout) => (printed = stdout.trim().split('\n').at(-1) || undefined)),
              ignoreElements(),
              catchError(inLastWords),
            ),
          ),
          // A flush that fails does not undo the pull.
          this.engine.flush(FLUSH_DEADLINE_MS).pipe(
            ignoreElements(),
            catchError(() => EMPTY),
          ),
        );
        // With a collector, an image that was not there before the agent's own pull is the agent's, as its pull
        // tells; a pull waits for room first.
        const gc = this.gc;
        const had$ =
          pull.policy === 'always' && !gc
            ? pull$
            : this.present(pull).pipe(
                mergeMap(({ there, since }) =>
                  there && pull.policy !== 'always'
                    ? EMPTY
                    : concat(gc?.room(pull) ?? EMPTY, pull$, there || !gc ? EMPTY : defer(() => gc.pulled(pull, { since, printed }))),
                ),
              );
        shared = had$.pipe(
          finalize(() => this.inFlight.delete(key)),
          share(),
        );
        this.inFlight.set(key, shared);
      }
      return shared;
    });
  }

  /**
   * A create that may pull its images (`run`, `kube play`): it waits for pulls of them already under way (rather
   * than pull them again), then for one of the engine's create slots; with a collector, the images that are not
   * there are pulled by the agent first (its own pull tells what it fetched; a create that pulls by itself does not).
   */
  creating<T>(pulls: readonly ImagePull[], create$: Observable<T>): Observable<T> {
    return defer(() => {
      // An image a pull under way had in the end is there: a burst of creates of one image asks the engine once.
      const had = new Set<ImagePull>();
      return concat(this.under(pulls, had), this.recording(pulls, this.creates.run(create$), had));
    });
  }

  /** The pulls under way for these images, if any are; those that ended with their image there are added to `had`. */
  under(pulls: readonly ImagePull[], had?: Set<ImagePull>): Observable<never> {
    return merge(
      ...pulls.map((pull) => {
        const underWay = this.inFlight.get(pull.args.join('\0'));
        if (!underWay) return EMPTY;
        return underWay.pipe(
          ignoreElements(),
          tap({ complete: () => had?.add(pull) }),
          catchError(() => EMPTY),
        );
      }),
    );
  }

  /**
   * With a collector, the images of `pulls` that are not there (and not asked for at every create) are pulled
   * before `create$`, recorded as their pulls tell; once it succeeded, its containers keep them. `had`: those
   * known to be there already.
   */
  private recording<T>(pulls: readonly ImagePull[], create$: Observable<T>, had: ReadonlySet<ImagePull>): Observable<T> {
    const gc = this.gc;
    const candidates = pulls.filter((pull) => pull.policy !== 'never' && !pull.image.startsWith('-'));
    if (!gc || candidates.length === 0) return create$;
    return concat(
      defer(() => merge(...candidates.filter((pull) => pull.policy === 'missing' && !had.has(pull)).map((pull) => this.ensure(pull)))).pipe(ignoreElements()),
      create$,
      defer(() => {
        for (const pull of candidates) gc.created(pull);
        return EMPTY;
      }),
    );
  }

  /**
   * Whether the image is there, and when the check began (as the collector's clock reads it). A check asked while
   * the same one is under way takes its answer: it is as new as its own would be.
   */
  private present(pull: ImagePull): Observable<{ readonly there: boolean; readonly since: number }> {
    const key = pull.present.join('\0');
    return defer(() => {
      let check = this.checking.get(key);
      if (!check) {
        const since = this.gc?.now() ?? 0;
        check = this.engine.present(pull).pipe(
          map((there) => ({ there, since })),
          finalize(() => this.checking.delete(key)),
          share(),
        );
        this.checking.set(key, check);
      }
      return check;
    });
  }
}

/** A presence query's failure read: exit code 1 says the image is not there; anything else is an error. */
export const notThere = (err: unknown): Observable<boolean> => (err instanceof CliError && err.exitCode === 1 ? of(false) : throwError(() => err));

/** A failed pull in the CLI's last words (lib/cli-words.ts). */
const inLastWords = (err: unknown): Observable<never> => throwError(() => (err instanceof CliError ? new CliError(lastWords(err.message), err.exitCode) : err));

/** The registry of an image reference (its first part when that names a host), as its pulls are grouped. */
export function registryOf(image: string): string {
  const first = image.split('/')[0];
  return image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost') ? first : 'docker.io';
}

/**
 * The deadline and stall bound of a create that may pull its images (its CLI's `run` or `kube play` pulls what is missing): the
 * pull's deadline, and the command deadline as the longest it may go without progress, so that a slow download
 * finishes and a create that hangs ends as soon as before. A create that never pulls keeps the command deadline.
 */
export function createDeadlines(pulls: readonly ImagePull[], engine: Pick<PullEngine, 'deadlineOf'>): Pick<Call, 'deadlineMs' | 'stallMs'> {
  return pulls.every((pull) => pull.policy === 'never') ? {} : { deadlineMs: PULL_DEADLINE_MS, stallMs: engine.deadlineOf('command') };
}
