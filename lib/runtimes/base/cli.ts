// swdd~podman-uses-podman-cli~1, swdd~podman-kube-uses-podman-cli~1: the one runner of a runtime's CLI (`podman`,
// `nerdctl`): short calls through the launcher, each in a slot and with a deadline, streams of lines, and checks
// inside a container.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Observable, type Subscription, catchError, defer, of, throwError } from 'rxjs';
import { LogLines, MAX_LINE_BYTES } from '../../log-lines.js';
import type { Logger } from '../../logger.js';
import { bytesRead, downloadFoldersOf, killMarkedProcesses, removeDownloadFolders } from '../../drivers/machine.js';
import { Kept, type Launcher, launcher } from '../../drivers/launcher.js';

/** A CLI call that failed; the message is what the CLI said on stderr. */
export class CliError extends Error {
  /** True when the call was made again locally after its route was lost: a first try may have done part of it. */
  retried = false;

  /** The CLI's exit code, when it ran and failed. */
  constructor(
    message: string,
    readonly exitCode?: number,
  ) {
    super(message);
  }
}

/** A query (ps, inspect, volume ls), a command (run, start, stop, rm, kube …), or a health check (their own slots: a slow check holds up no other call). */
export type CallKind = 'query' | 'command' | 'check';

/**
 * Starts a subprocess on the next turn of the event loop, so that a call cancelled in the turn that asked
 * for it (a log request and its cancel read together) starts no process. Returns the teardown.
 */
function startSoon(start: () => { kill: () => void }): () => void {
  let kill: (() => void) | undefined;
  const soon = setImmediate(() => {
    kill = start().kill;
  });
  return () => {
    clearImmediate(soon);
    kill?.();
  };
}

/** Bytes of a call's standard output kept at most (the largest `ps` of thousands of containers fits); more fails the call. */
const MAX_OUTPUT_BYTES = 64 * 2 ** 20;
/** Bytes of its standard error kept: the message a failure reports. */
const MAX_ERROR_BYTES = 16 * 2 ** 10;

/** How a health check in a container ended: `output` is the start of what it wrote on stdout and stderr. */
export type CheckOutcome =
  | { readonly kind: 'passed' | 'failed'; readonly output: string }
  /** Still running at its timeout: killed, with all it started. */
  | { readonly kind: 'timed-out'; readonly output: string }
  /** The CLI could not run it (the container is not running): it says nothing of the health. */
  | { readonly kind: 'not-run'; readonly output: string };

/** The variable that marks a check's processes in the container, so that all of them can be found and killed. */
const CHECK_MARK = 'ANKAGENT_HEALTH_CHECK';
/** How much of a check's output is kept (a state shows 512 characters of it). */
const MAX_CHECK_OUTPUT_BYTES = 4096;
/** What a download must read to count as progress. */
const PROGRESS_BYTES = 4096;
/** The container CLIs' own exit code for "the CLI failed" (not the command's): Podman's, nerdctl's and Docker's alike. */
const CLI_FAILED = 125;

/** A limited number of slots: work waits in line for one, and gives it back when it ends or is cancelled. */
export class Slots {
  private readonly waiting: Array<() => void> = [];

  constructor(private free: number) {}

  /** Whether work given now would wait for a slot. */
  get full(): boolean {
    return this.free === 0;
  }

  run<T>(work: Observable<T>): Observable<T> {
    return new Observable<T>((subscriber) => {
      let inner: Subscription | undefined;
      let holding = false;
      const start = () => {
        holding = true;
        inner = work.subscribe(subscriber);
      };
      if (this.free > 0) {
        this.free -= 1;
        start();
      } else {
        this.waiting.push(start);
      }
      return () => {
        const queued = this.waiting.indexOf(start);
        if (queued >= 0) this.waiting.splice(queued, 1);
        inner?.unsubscribe();
        if (holding) this.release();
      };
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}

/**
 * How a call goes other than by starting the CLI anew: through an engine's running service (Podman's:
 * lib/runtimes/podman/service.ts), answered by it (`answer`, its text as the CLI prints it) or by the CLI's
 * client of it (`args`); or locally, with the reason (`why`).
 */
export type Plan =
  | { readonly via: 'service'; readonly args: readonly string[]; readonly progressPid?: number }
  | { readonly via: 'service'; readonly answer: (deadlineMs: number) => Promise<string> }
  | { readonly via: 'cli'; readonly why: string };

/** A way to the engine that a call may take instead of a process of its own (the CLI's `route`). */
export interface CallRoute {
  plan(args: readonly string[]): Plan;
  /** Whether a routed call's failure says the way is gone (not the engine's answer): the call then runs locally. */
  lost(message: string): boolean;
  /** Told of a routed call that failed by `lost` words or ran long: it decides whether the way is down and mends it. */
  failed(why: string): void;
  /** Whether the way still answers within `withinMs` (asked of a routed call that runs long). */
  alive(withinMs: number): Promise<boolean>;
}

/** A routed call's way went: the call is run again locally. */
export class RouteLost extends Error {}

/** How often a routed call still running asks whether its way answers (a stalled service ends it at once, not at its deadline). */
const ROUTE_PROBE_MS = 2000;

/** Asks `route` every ROUTE_PROBE_MS whether it answers; `lost` hears of the first time it does not. Returns the timer. */
const probeRoute = (route: CallRoute, lost: (err: RouteLost) => void): NodeJS.Timeout =>
  setInterval(() => {
    route.alive(ROUTE_PROBE_MS / 2).then((alive) => alive || lost(new RouteLost(`the service did not answer within ${ROUTE_PROBE_MS / 2000} s`)));
  }, ROUTE_PROBE_MS);

export interface CliOptions {
  /** The CLI (`podman`, `nerdctl`), by name on the PATH or by path. */
  readonly binary: string;
  /** How long a query (ps, volume ls) and a command (run, start, stop, rm, kube …) may take before it is killed, in ms. */
  readonly deadlines?: { readonly query: number; readonly command: number };
  /** How many calls may run at once; long-running streams (events, logs) are not counted. */
  readonly maxProcesses?: number;
  /** How many output streams (`podman logs`, `podman events`) may run at once; more wait for one to end. */
  readonly maxStreams?: number;
  readonly log?: Logger;
  /** What starts its short calls (the agent's one launcher unless given). */
  readonly launcher?: Launcher;
  /** Told of each call (not the streams) when it ended: how, and how long it took (the metrics). */
  readonly observe?: (call: {
    readonly subcommand: string;
    readonly args: readonly string[];
    readonly outcome: 'ok' | 'failed' | 'deadline';
    readonly seconds: number;
    /** The way it took, when the CLI has a route: the service, or the CLI and why. */
    readonly via?: string;
  }) => void;
  /** Another way to its calls (an engine's service); without one every call starts the CLI. */
  readonly route?: CallRoute;
}

export const DEFAULT_DEADLINES = { query: 10_000, command: 120_000 };
export const DEFAULT_MAX_PROCESSES = 8;
/** Every workload of a large node can have its logs followed at once; a flood of requests cannot start thousands of processes. */
export const DEFAULT_MAX_STREAMS = 256;

export class Cli {
  /** How many processes this CLI started (for tests and benchmarks of the call economy). */
  calls = 0;
  private readonly binary: string;
  /** The binary's name, as messages say it (`podman`, `nerdctl`). */
  private readonly command: string;
  private readonly deadlines: { readonly query: number; readonly command: number };
  private readonly slots: Slots;
  private readonly streamSlots: Slots;
  private readonly checkSlots: Slots;

  /** How long a command may take (a stalled download is ended after as long without progress). */
  get commandDeadlineMs(): number {
    return this.deadlines.command;
  }

  constructor(private readonly options: CliOptions) {
    this.binary = options.binary;
    this.command = path.basename(this.binary);
    this.deadlines = options.deadlines ?? DEFAULT_DEADLINES;
    this.slots = new Slots(options.maxProcesses ?? DEFAULT_MAX_PROCESSES);
    this.streamSlots = new Slots(options.maxStreams ?? DEFAULT_MAX_STREAMS);
    this.checkSlots = new Slots(options.maxProcesses ?? DEFAULT_MAX_PROCESSES);
  }

  /**
   * Runs the CLI with `args` (input on stdin when given) and emits its stdout. Cold; unsubscribing kills it.
   * It waits for one of the limited slots, and is killed when it outlives its deadline, or, with `stallMs`
   * (a call that downloads: a pull, a create that may pull), when it has read nothing for that long. A killed
   * call's partial downloads are removed once it has ended (Podman leaves them when it is killed). With a
   * route, the call goes its way where it can; a call whose way is lost under it runs again locally.
   */
  run(args: readonly string[], input?: string, kind: CallKind = 'command', deadlineMs?: number, stallMs?: number): Observable<string> {
    const deadline = deadlineMs ?? this.deadlines[kind === 'check' ? 'command' : kind];
    const slots = kind === 'check' ? this.checkSlots : this.slots;
    const route = this.options.route;
    if (!route) return slots.run(this.launched(args, args, input, deadline, stallMs));
    return defer(() => {
      const plan = route.plan(args);
      if (plan.via === 'cli') return slots.run(this.launched(args, args, input, deadline, stallMs, `CLI (${plan.why})`));
      const routed$ =
        'answer' in plan
          ? this.answered(args, plan.answer, deadline, route)
          : this.launched(args, plan.args, input, deadline, stallMs, 'service', plan.progressPid, route);
      return slots.run(routed$).pipe(
        catchError((err: unknown) => {
          const lost = err instanceof RouteLost || (err instanceof CliError && route.lost(err.message));
          if (!lost) return throwError(() => err);
          route.failed((err as Error).message);
          return slots.run(this.launched(args, args, input, deadline, stallMs, `CLI (the service was lost: ${(err as Error).message})`)).pipe(
            catchError((again: unknown) => {
              if (again instanceof CliError) again.retried = true;
              return throwError(() => again);
            }),
          );
        }),
      );
    });
  }

  /**
   * A call the route answers itself, within the deadline; a failure of the way is a RouteLost, and so is a
   * way that stops answering its ping meanwhile (the answer is not waited for).
   */
  private answered(args: readonly string[], answer: (deadlineMs: number) => Promise<string>, deadline: number, route: CallRoute): Observable<string> {
    return new Observable<string>((subscriber) => {
      const started = performance.now();
      const subcommand = args.find((a) => !a.startsWith('-')) ?? '';
      const end = (outcome: 'ok' | 'failed', result: () => void) => {
        if (subscriber.closed) return;
        clearInterval(probe);
        this.options.observe?.({ subcommand, args, outcome, seconds: (performance.now() - started) / 1000, via: 'service (REST)' });
        result();
      };
      const probe = probeRoute(route, (lost) => end('failed', () => subscriber.error(lost)));
      answer(deadline).then(
        (text) =>
          end('ok', () => {
            subscriber.next(text);
            subscriber.complete();
          }),
        (err: unknown) => end('failed', () => subscriber.error(err)),
      );
      return () => clearInterval(probe);
    });
  }

  /**
   * The CLI started with `argv` (`args` as the call was asked, for what is told of it). A routed call (`route`)
   * asks its way every ROUTE_PROBE_MS whether it answers, and is ended as a RouteLost when it does not;
   * `progressPid`: whose reads count as a download's progress (the service's, which downloads for its client).
   */
  private launched(
    args: readonly string[],
    argv: readonly string[],
    input: string | undefined,
    deadline: number,
    stallMs?: number,
    via?: string,
    progressPid?: number,
    route?: CallRoute,
  ): Observable<string> {
    return new Observable<string>((subscriber) =>
      startSoon(() => {
        this.calls += 1;
        const started = performance.now();
        const subcommand = args.find((a) => !a.startsWith('-')) ?? '';
        let over = false;
        let leftovers: string[] = [];
        const end = (outcome: 'ok' | 'failed' | 'deadline', result: () => void) => {
          if (over) return;
          over = true;
          clearTimeout(timer);
          clearInterval(watch);
          clearInterval(probe);
          this.options.observe?.({ subcommand, args, outcome, seconds: (performance.now() - started) / 1000, via });
          result();
        };
        const kill = (this.options.launcher ?? launcher).launch(
          { binary: this.binary, args: argv, input, maxStdout: MAX_OUTPUT_BYTES, maxStderr: MAX_ERROR_BYTES },
          (ending) => {
            removeDownloadFolders(leftovers);
            if (ending.kind === 'not-run') {
              end('failed', () => subscriber.error(new CliError(`Cannot run ${this.command}: ${ending.message}`)));
            } else if (ending.kind === 'output-lost') {
              end('failed', () =>
                subscriber.error(new CliError(`${this.command} ${subcommand} exited with ${ending.code}, but ${ending.message}`, ending.code)),
              );
            } else if (ending.kind === 'too-much') {
              end('failed', () => subscriber.error(new CliError(`${this.command} ${subcommand} wrote more than ${MAX_OUTPUT_BYTES} bytes.`)));
            } else if (ending.code === 0) {
              end('ok', () => {
                subscriber.next(ending.stdout.toString().replace(/\r?\n$/, ''));
                subscriber.complete();
              });
            } else {
              const said = ending.stderr
                .toString()
                .trim()
                .replace(/^Error: /, '');
              end('failed', () => subscriber.error(new CliError(said || `${this.command} ${subcommand} failed with exit code ${ending.code}.`, ending.code)));
            }
          },
        );
        /** Kills it, noting first the partial downloads it holds open, to be removed once it has ended. */
        const stop = (signal?: NodeJS.Signals) => {
          const pid = kill.pid();
          if (pid !== undefined) leftovers = [...new Set([...leftovers, ...downloadFoldersOf(pid)])];
          kill(signal);
        };
        // At the deadline the call is over for the agent, whatever the CLI (or what it started) still holds.
        const killed = (why: string) => {
          const message = `${this.command} ${subcommand} ${why} and was killed.`;
          this.options.log?.warn(message);
          stop('SIGKILL');
          end('deadline', () => subscriber.error(new CliError(message)));
        };
        const timer = setTimeout(() => killed(`did not finish within ${deadline / 1000} s`), deadline);
        const progressOf = progressPid === undefined ? kill.pid : () => progressPid;
        const watch = stallMs === undefined ? undefined : this.watchProgress(progressOf, stallMs, () => killed(`made no progress for ${stallMs / 1000} s`));
        const probe =
          route &&
          probeRoute(route, (lost) => {
            if (over) return;
            stop('SIGKILL');
            end('failed', () => subscriber.error(lost));
          });
        return {
          kill: () => {
            over = true;
            clearTimeout(timer);
            clearInterval(watch);
            clearInterval(probe);
            stop();
          },
        };
      }),
    );
  }

  /**
   * Calls `stalled` once the process has read less than PROGRESS_BYTES in `stallMs` (its bytes read, looked at a
   * few times in that span; an idle Go program still reads a byte now and then, its own wake-ups).
   */
  private watchProgress(pid: () => number | undefined, stallMs: number, stalled: () => void): NodeJS.Timeout {
    let base = 0;
    let since = performance.now();
    const watch = setInterval(
      () => {
        const p = pid();
        const read = p === undefined ? undefined : bytesRead(p);
        if (read !== undefined && read - base >= PROGRESS_BYTES) [base, since] = [read, performance.now()];
        else if (performance.now() - since >= stallMs) {
          clearInterval(watch);
          stalled();
        }
      },
      Math.min(5000, stallMs / 4),
    );
    return watch;
  }

  /**
   * Runs the CLI with `args` and emits each line it writes on stdout or stderr as it comes; completes when
   * it ends; unsubscribing kills it. While `paused$` says true its output is not read: the pipes fill
   * and it waits, so what it prints costs the agent nothing until it is wanted. Of a line longer than
   * `maxLineBytes` (what a log response carries of one) only that much is kept: no line, however long, is held whole (lib/log-lines.ts). At most
   * `maxStreams` run at once; more wait in line for one to end.
   */
  lines(args: readonly string[], paused$: Observable<boolean> = of(false), maxLineBytes = MAX_LINE_BYTES): Observable<string> {
    return this.streamSlots.run(this.streamLines(args, paused$, maxLineBytes));
  }

  /** A stream needs only its pipes: its lines are taken as they come, never held whole. */
  private streamLines(args: readonly string[], paused$: Observable<boolean>, maxLineBytes: number): Observable<string> {
    return new Observable<string>((subscriber) =>
      startSoon(() => {
        this.calls += 1;
        const child = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        child.on('error', (err) => subscriber.error(new CliError(`Cannot run ${this.command}: ${err.message}`)));
        let open = 2;
        const done = () => --open === 0 && subscriber.complete();
        const streams = [child.stdout, child.stderr];
        for (const stream of streams) {
          const lines = new LogLines(maxLineBytes);
          let ended = false;
          const end = (last: string[]) => {
            if (ended) return;
            ended = true;
            last.forEach((line) => subscriber.next(line));
            done();
          };
          stream.on('data', (chunk: Buffer) => {
            lines.push(chunk).forEach((line) => subscriber.next(line));
            if (!lines.closed) return;
            // swdd~agent-checks-size-of-logs~1: nothing more of this output is taken.
            stream.destroy();
            end([]);
          });
          stream.on('end', () => end(lines.end()));
        }
        const pausing = paused$.subscribe((paused) => streams.forEach((stream) => (paused ? stream.pause() : stream.resume())));
        return {
          kill: () => {
            pausing.unsubscribe();
            // Nothing more is read, even if something the CLI started holds the pipes open.
            streams.forEach((stream) => stream.destroy());
            if (child.exitCode === null) child.kill('SIGKILL');
          },
        };
      }),
    );
  }

  /**
   * Runs the CLI as a peer spoken to (a bus bridge): what `input$` gives is written to its stdin, and its stdout
   * is emitted as it comes, in chunks. It is a stream (the stream slots); it errors when the process ends, with
   * the start of what it said on stderr; unsubscribing kills it.
   */
  conversation(args: readonly string[], input$: Observable<string | Uint8Array>): Observable<Buffer> {
    return this.streamSlots.run(
      new Observable<Buffer>((subscriber) =>
        startSoon(() => {
          this.calls += 1;
          const child = spawn(this.binary, args, { stdio: ['pipe', 'pipe', 'pipe'] });
          const said = new Kept(4096);
          child.on('error', (err) => subscriber.error(new CliError(`Cannot run ${this.command}: ${err.message}`)));
          child.stdin.on('error', () => undefined);
          child.stdout.on('data', (chunk: Buffer) => subscriber.next(chunk));
          child.stderr.on('data', (chunk: Buffer) => said.add(chunk));
          child.on('close', (code, signal) =>
            subscriber.error(new CliError(`${this.command} ended (${signal ?? `exit ${code}`})${said.bytes() > 0 ? `: ${said.all().toString().trim()}` : ''}`)),
          );
          const writing = input$.subscribe({ next: (bytes) => child.stdin.write(bytes) });
          return {
            kill: () => {
              writing.unsubscribe();
              // Its stdin closed too: a peer that outlives the kill (a bridge in another namespace) ends on EOF.
              child.stdin.destroy();
              child.stdout.destroy();
              if (child.exitCode === null) child.kill('SIGKILL');
            },
          };
        }),
      ),
    );
  }

  /**
   * Runs a health check in a running container (`<cli> exec`, in the check slots) and emits how it ended.
   * A check still running at `timeoutMs` has failed: it is killed, and so is everything it started in the
   * container, found by the variable it carries (`podman exec` leaves them running when its client dies). The
   * same when the check is cancelled. Only the first 4 KiB of its output are kept.
   */
  check(container: string, argv: readonly string[], timeoutMs: number): Observable<CheckOutcome> {
    return this.checkSlots.run(
      new Observable<CheckOutcome>((subscriber) => {
        let over = false;
        const marker = `${CHECK_MARK}=${randomBytes(12).toString('hex')}`;
        const sweep = () => setImmediate(() => killMarkedProcesses(marker));
        const teardown = startSoon(() => {
          this.calls += 1;
          const started = performance.now();
          const args = ['exec', '--env', marker, container, ...argv];
          // Checks run locally whatever the route (Podman's service keeps every exec session); it says why.
          const plan = this.options.route?.plan(args);
          const child = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
          const kept = new Kept(MAX_CHECK_OUTPUT_BYTES);
          const keep = (chunk: Buffer) => kept.add(chunk);
          child.stdout.on('data', keep);
          child.stderr.on('data', keep);
          const output = () => kept.all().toString();
          const end = (outcome: CheckOutcome, observed: 'ok' | 'failed' | 'deadline') => {
            if (over) return;
            over = true;
            clearTimeout(deadline);
            this.options.observe?.({
              subcommand: 'exec',
              args: ['exec', container],
              outcome: observed,
              seconds: (performance.now() - started) / 1000,
              via: plan?.via === 'cli' ? `CLI (${plan.why})` : undefined,
            });
            subscriber.next(outcome);
            subscriber.complete();
          };
          const deadline = setTimeout(() => {
            child.kill('SIGKILL');
            child.stdout.destroy();
            child.stderr.destroy();
            sweep();
            end({ kind: 'timed-out', output: output() }, 'deadline');
          }, timeoutMs);
          child.on('error', (err) => end({ kind: 'not-run', output: `Cannot run ${this.command}: ${err.message}` }, 'failed'));
          child.on('close', (code) => {
            if (code === 0) end({ kind: 'passed', output: output() }, 'ok');
            else end({ kind: code === CLI_FAILED ? 'not-run' : 'failed', output: output() }, 'failed');
          });
          return {
            kill: () => {
              if (over) return;
              over = true;
              clearTimeout(deadline);
              child.kill('SIGKILL');
              sweep();
            },
          };
        });
        return teardown;
      }),
    );
  }
}
