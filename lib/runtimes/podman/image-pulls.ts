// Images had before they are needed (an update's new image while the old instance runs, a waiting
// workload's while it waits): `podman image exists`, then `podman pull` when it is not there or the
// workload asks for a pull every time. One pull per image and options at a time, shared by all who need
// it; at most MAX_PULLS at once; each with its own deadline.
import { EMPTY, type Observable, catchError, defer, finalize, ignoreElements, map, mergeMap, of, share, throwError } from 'rxjs';
import type { ImagePull } from './runtime-config.js';
import { type PodmanCli, PodmanError, Slots } from './cli.js';

/** Pulls that run at once; more wait for one to end. */
export const MAX_PULLS = 2;
/** How long a pull may take: an image of hundreds of MiB over a slow link. */
export const PULL_DEADLINE_MS = 30 * 60_000;

export class ImagePulls {
  private readonly inFlight = new Map<string, Observable<never>>();
  private readonly slots = new Slots(MAX_PULLS);

  constructor(
    private readonly cli: PodmanCli,
    private readonly deadlineMs = PULL_DEADLINE_MS,
  ) {}

  /** Completes when the image is there (pulled if need be); fails with Podman's reason when it cannot be pulled. */
  ensure(pull: ImagePull): Observable<never> {
    if (pull.policy === 'never') return EMPTY;
    const key = pull.args.join('\0');
    return defer(() => {
      let shared = this.inFlight.get(key);
      if (!shared) {
        const pull$ = this.slots.run(this.cli.run(pull.args, undefined, 'command', this.deadlineMs).pipe(ignoreElements(), catchError(inLastWords)));
        const had$ = pull.policy === 'always' ? pull$ : this.present(pull).pipe(mergeMap((there) => (there ? EMPTY : pull$)));
        shared = had$.pipe(
          finalize(() => this.inFlight.delete(key)),
          share(),
        );
        this.inFlight.set(key, shared);
      }
      return shared;
    });
  }

  /** The pull under way for the same image and options, if one is: a create waits for it rather than pull the image again. */
  under(pull: ImagePull): Observable<never> {
    return (this.inFlight.get(pull.args.join('\0')) ?? EMPTY).pipe(catchError(() => EMPTY));
  }

  /** Whether the image is there (`podman image exists`: exit code 1 when it is not). */
  private present(pull: ImagePull): Observable<boolean> {
    return this.cli.run([...pull.generalOptions, 'image', 'exists', pull.image], undefined, 'query').pipe(
      map(() => true),
      catchError((err: unknown) => (err instanceof PodmanError && err.exitCode === 1 ? of(false) : throwError(() => err))),
    );
  }
}

/**
 * A failed pull in the CLI's last words: Podman writes each of its own tries as a warning line before its
 * error (`time=… level=warning msg="Failed, retrying in 1s …"`), and the error alone says why.
 */
const inLastWords = (err: unknown): Observable<never> => {
  if (!(err instanceof PodmanError)) return throwError(() => err);
  const last = err.message
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^time="[^"]*" level=/.test(line))
    .at(-1);
  return throwError(() => new PodmanError((last ?? err.message).replace(/^Error: /, ''), err.exitCode));
};
