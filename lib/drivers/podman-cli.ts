// swdd~podman-uses-podman-cli~1, swdd~podman-kube-uses-podman-cli~1: the only code that runs `podman`.
import { Observable, map } from 'rxjs';
import type { Container } from '../podman/container-state.js';

/** A podman command that failed; the message is what podman said on stderr. */
export class PodmanError extends Error {}

/** execa, loaded on first use: it is the heaviest module, and nothing needs it before the agent said hello. */
let execaLoaded: Promise<typeof import('execa')> | undefined;
const loadExeca = () => (execaLoaded ??= import('execa'));

/** Subscribes `start` to a subprocess of podman once execa is loaded; the teardown kills it. */
function withSubprocess<T>(start: (execa: typeof import('execa')['execa'], subscriber: import('rxjs').Subscriber<T>) => { kill: () => void }): Observable<T> {
  return new Observable<T>((subscriber) => {
    let kill: (() => void) | undefined;
    let cancelled = false;
    loadExeca().then(({ execa }) => {
      if (!cancelled) kill = start(execa, subscriber).kill;
    }, (err: unknown) => subscriber.error(new PodmanError(`Cannot load execa: ${String(err)}`)));
    return () => {
      cancelled = true;
      kill?.();
    };
  });
}

export interface Volume {
  readonly Name: string;
  readonly Labels?: Readonly<Record<string, string>> | null;
}

export class PodmanCli {
  /** How many podman processes this CLI started (for tests and benchmarks of the call economy). */
  calls = 0;

  constructor(private readonly binary = 'podman') {}

  /** Runs `podman <args>` (input on stdin when given) and emits its stdout. Cold; unsubscribing kills it. */
  run(args: readonly string[], input?: string): Observable<string> {
    return withSubprocess<string>((execa, subscriber) => {
      this.calls += 1;
      const child = execa(this.binary, args, { input, reject: false, stripFinalNewline: true });
      child.then((result) => {
        if (!result.failed) {
          subscriber.next(result.stdout);
          subscriber.complete();
        } else if (result.exitCode === undefined && !result.isTerminated) {
          subscriber.error(new PodmanError(`Cannot run podman: ${result.shortMessage ?? 'unknown error'}`));
        } else {
          subscriber.error(new PodmanError((String(result.stderr ?? '').trim() || result.shortMessage || 'podman failed').replace(/^Error: /, '')));
        }
      }, (err: unknown) => subscriber.error(new PodmanError(`Cannot run podman: ${String(err)}`)));
      return { kill: () => child.exitCode === null && child.kill() };
    });
  }

  /**
   * Runs `podman <args>` and emits each line it writes on stdout or stderr as it comes; completes when
   * podman ends; unsubscribing kills it.
   */
  lines(args: readonly string[]): Observable<string> {
    return withSubprocess<string>((execa, subscriber) => {
      this.calls += 1;
      const child = execa(this.binary, args, { reject: false, buffer: false, stdin: 'ignore' });
      let open = 2;
      const done = () => --open === 0 && subscriber.complete();
      for (const stream of [child.stdout, child.stderr]) {
        let rest = '';
        stream.setEncoding('utf8');
        stream.on('data', (chunk: string) => {
          const parts = (rest + chunk).split('\n');
          rest = parts.pop()!;
          parts.forEach((line) => subscriber.next(line));
        });
        stream.on('end', () => {
          if (rest !== '') subscriber.next(rest);
          done();
        });
      }
      child.catch((err: unknown) => subscriber.error(new PodmanError(`Cannot run podman: ${String(err)}`)));
      return { kill: () => child.exitCode === null && child.kill('SIGKILL') };
    });
  }

  /** `podman ps --all --format=json`, optionally filtered. */
  listContainers(filters: readonly string[] = []): Observable<Container[]> {
    return this.run(['ps', '--all', '--format=json', ...filters.map((f) => `--filter=${f}`)]).pipe(map(parseJsonList<Container>));
  }

  listVolumes(filters: readonly string[] = []): Observable<Volume[]> {
    return this.run(['volume', 'ls', '--format=json', ...filters.map((f) => `--filter=${f}`)]).pipe(map(parseJsonList<Volume>));
  }
}

function parseJsonList<T>(text: string): T[] {
  if (text.trim() === '') return [];
  const parsed = JSON.parse(text) as T[] | null;
  return parsed ?? [];
}
