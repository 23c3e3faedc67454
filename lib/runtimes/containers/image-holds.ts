// What keeps an image a workload of this agent waits for until its create: a mark, so that this agent's collector
// takes none of them meanwhile, and, on one the agent did not pull itself, a name of its own (HOLD_REPOSITORY), so
// that another agent's collector of the same store keeps it too. Both end at the create, or after WANTED_MS.
import { EMPTY, type Observable, type SchedulerLike, type Subscription, catchError, defer, finalize, ignoreElements, share, tap, timer } from 'rxjs';
import type { ImagePull } from './images.js';
import { MAX_RECORDED } from './image-record.js';
import { instanceId } from '../../workload.js';

/**
 * How long an image a workload waits for (pulled ahead, its create not done yet) is kept without a container: a
 * workload deleted while it waits tells the collector nothing, so the mark ends by itself.
 */
const WANTED_MS = 60 * 60_000;

/**
 * The repository of the names an agent gives an image another pulled while a workload of its own waits for it:
 * another agent's collector keeps an image with such a name (and forgets none for it).
 */
export const HOLD_REPOSITORY = 'localhost/ankaios-hold';

export const isHold = (name: string) => name.startsWith(`${HOLD_REPOSITORY}:`);

/** A short digest of `text` for a name's part (8 hex digits). */
export const digestOf = (text: string): string => instanceId(text).slice(0, 8);

const wantedKey = ({ storage, image }: { readonly storage: readonly string[]; readonly image: string }) => `${storage.join('\0')}\0\0${image}`;

/** What the holds ask of an engine, for one storage. */
export interface NamingEngine {
  /** Its name in the record and in messages (`podman`, `containerd`). */
  readonly name: string;
  /** Gives the image `image` names the further name `name`. */
  tag(storage: readonly string[], image: string, name: string): Observable<unknown>;
  /** Takes the name `name` from its image, never the image. */
  untag(storage: readonly string[], name: string): Observable<unknown>;
}

export class ImageHolds {
  /** Images a workload of this agent names and waits for (by storage and image), and since when. */
  private readonly wanted = new Map<string, number>();
  /** The hold names this agent gave images it waits for and did not pull (by storage and image), each let go of in WANTED_MS. */
  private readonly holds = new Map<string, { readonly name: string; readonly storage: readonly string[]; readonly expiry: Subscription }>();
  /** The hold names being given: a workload that waits for the same image meanwhile waits for that one. */
  private readonly giving = new Map<string, Observable<never>>();

  constructor(
    private readonly engine: NamingEngine,
    /** Whether the agent pulled `pull`'s image itself: its own collector keeps it while wanted. */
    private readonly pulledByAgent: (pull: ImagePull) => boolean,
    private readonly scheduler: SchedulerLike,
    /** Where the expiries and the let-go's are held: the run lets go of them when it ends. */
    private readonly held: Subscription,
    /** What tells this agent's hold names from another's (the same across its restarts). */
    private readonly holder: string,
    private readonly note?: (text: string) => void,
  ) {}

  /** A workload names `pull`'s image and its create is still to come. */
  want(pull: ImagePull): void {
    this.wanted.delete(wantedKey(pull));
    this.wanted.set(wantedKey(pull), this.scheduler.now());
    // Bounded: the oldest marks go first.
    if (this.wanted.size > MAX_RECORDED) this.wanted.delete(this.wanted.keys().next().value!);
  }

  /** The create that wanted `pull`'s image is done: its container keeps the image from now on. */
  created(pull: ImagePull): void {
    this.wanted.delete(wantedKey(pull));
    this.letGo(wantedKey(pull));
  }

  isWanted(storage: readonly string[], image: string): boolean {
    const since = this.wanted.get(wantedKey({ storage, image }));
    return since !== undefined && this.scheduler.now() - since < WANTED_MS;
  }

  /** `pull`'s image, which is there, gets a hold name until the create (or WANTED_MS), unless the agent pulled it. */
  hold(pull: ImagePull): Observable<never> {
    return defer(() => {
      const key = wantedKey(pull);
      if (this.pulledByAgent(pull) || this.holds.has(key)) return EMPTY;
      const giving =
        this.giving.get(key) ??
        this.give(key, pull).pipe(
          finalize(() => this.giving.delete(key)),
          share(),
        );
      this.giving.set(key, giving);
      return giving;
    });
  }

  private give(key: string, pull: ImagePull): Observable<never> {
    const name = `${HOLD_REPOSITORY}:${this.holder}-${digestOf(key)}`;
    return this.engine.tag(pull.storage, pull.image, name).pipe(
      tap(() => {
        const expiry = timer(WANTED_MS, this.scheduler).subscribe(() => this.letGo(key));
        this.held.add(expiry);
        this.holds.set(key, { name, storage: pull.storage, expiry });
        this.note?.(`${this.engine.name}: held ${pull.image} as ${name} while a workload waits for it`);
      }),
      ignoreElements(),
      catchError((err: unknown) => {
        this.note?.(`${this.engine.name}: ${pull.image} not held: ${(err as Error).message}`);
        return EMPTY;
      }),
    );
  }

  /** Takes the hold name of `key` (if any) from its image; kept by the run until done. */
  private letGo(key: string): void {
    const hold = this.holds.get(key);
    if (!hold) return;
    this.holds.delete(key);
    hold.expiry.unsubscribe();
    this.held.add(
      this.engine
        .untag(hold.storage, hold.name)
        .pipe(catchError(() => EMPTY))
        .subscribe(),
    );
  }
}
