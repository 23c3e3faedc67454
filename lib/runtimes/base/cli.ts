// The one runner of a runtime's CLI (the engine's command, `systemctl`) on the run's process driver: short calls, each in a slot and with a deadline, streams of
// lines, conversations, and attempts whose output is kept only in part.
import path from 'node:path';
import { Observable, type TimestampProvider, catchError, defer, of, throwError } from 'rxjs';
import { MAX_LINE_BYTES } from '../../log-lines.js';
import type { Logger } from '../../logger.js';
import { bytesRead } from '../../drivers/machine.js';
import { Slots } from './slots.js';
import { type Background, type Ending, ProcessEnded, type Processes, startSoon } from '../../drivers/processes.js';

/** A CLI call that failed; the message is what the CLI said on stderr. */
export class CliError extends Error {
  /** True when the call was made again after its first way was lost: the first try may have done part of it. */
  retried = false;

  /** The CLI's exit code, when it ran and failed. */
  constructor(
    message: string,
    readonly exitCode?: number,
  ) {
    super(message);
  }
}

/** What a call was about is not there (a container, a volume): an engine's client says so in its own way, as this. */
export class NotFound extends CliError {}

/** The CLI itself is not on this host (not on the PATH, no file where its path says). */
export class NotInstalled extends CliError {}

/** A query (ps, inspect, volume ls) or a command (run, start, stop, rm, kube …): each kind has its deadline. */
export type CallKind = 'query' | 'command';

/** Bytes of a call's standard output kept at most (the largest list of thousands of workloads fits); more fails the call. */
const MAX_OUTPUT_BYTES = 64 * 2 ** 20;
/** Bytes of its standard error kept: the message a failure reports. */
const MAX_ERROR_BYTES = 16 * 2 ** 10;

/** How an attempt ended: its exit code, or killed at its timeout; `output` is the start of what it wrote on stdout and stderr. */
export type Attempt =
  | { readonly kind: 'exited'; readonly code: number; readonly output: string }
  | { readonly kind: 'timed-out'; readonly output: string }
  /** The CLI could not be started. */
  | { readonly kind: 'not-run'; readonly output: string };

/** What a download must read to count as progress. */
const PROGRESS_BYTES = 4096;

export interface CliOptions {
  /** The CLI, by name on the PATH or by path. */
  readonly binary: string;
  /** How long a query (ps, volume ls) and a command (run, start, stop, rm, kube …) may take before it is killed, in ms. */
  readonly deadlines?: { readonly query: number; readonly command: number };
  /** How many calls may run at once; long-running streams (events, logs) are not counted. */
  readonly maxProcesses?: number;
  /** How many output streams (logs, events) may run at once; more wait for one to end. */
  readonly maxStreams?: number;
  readonly log?: Logger;
  /** What runs its processes: the run's. */
  readonly processes: Processes;
  /** The run's clock (ms), which times the calls for the metrics. */
  readonly clock: TimestampProvider;
  /**
   * What a call killed at its deadline or stall leaves behind that its engine removes only when it ends by itself
   * (an engine's partial downloads): noted by its pid before the kill, removed once it has ended.
   */
  readonly leftovers?: {
    readonly of: (pid: number) => readonly string[];
    readonly remove: (found: readonly string[]) => void;
  };
  /** Told of each call (not the streams) when it ended: how, and how long it took (the metrics). */
  readonly observe?: (call: {
    readonly subcommand: string;
    readonly args: readonly string[];
    readonly outcome: 'ok' | 'failed' | 'deadline';
    readonly seconds: number;
    /** The way it took, where its caller said (an engine's service, or the CLI and why). */
    readonly via?: string;
  }) => void;
}

export const DEFAULT_DEADLINES = { query: 10_000, command: 120_000 };
export const DEFAULT_MAX_PROCESSES = 8;
/** Every workload of a large node can have its logs followed at once; a flood of requests cannot start thousands of processes. */
export const DEFAULT_MAX_STREAMS = 256;

/** How a call is run: its input, kind, deadline (the kind's unless given) and, for a call that downloads, its stall. */
export interface Call {
  /** Given on its stdin. */
  readonly input?: string;
  readonly kind?: CallKind;
  readonly deadlineMs?: number;
  /** Killed when it has read less than PROGRESS_BYTES for this long (a pull, a create that may pull). */
  readonly stallMs?: number;
  /** Whose reads count as a download's progress (a service that downloads for its client); the call's own unless given. */
  readonly progressPid?: number;
  /** The way it takes, as told to `observe`. */
  readonly via?: string;
  /** The arguments as its caller asked for them, as told to `observe`, where those run differ (a remote client's options before them). */
  readonly asked?: readonly string[];
}

/** What runs a CLI's short calls: a Cli, or an engine's client that takes some of them another way. */
export type CallRunner = Pick<Cli, 'run' | 'sibling' | 'deadlineOf'>;

export class Cli {
  /** How many processes this CLI started (for tests and benchmarks of the call economy). */
  calls = 0;
  private readonly binary: string;
  /** The binary's name, as messages say it. */
  private readonly command: string;
  private readonly deadlines: { readonly query: number; readonly command: number };
  private readonly slots: Slots;
  private readonly streamSlots: Slots;
  private readonly attemptSlots: Slots;

  /** The run's clock, as the calls are timed (a client that calls another way times those by it too). */
  readonly clock: TimestampProvider;

  constructor(private readonly options: CliOptions) {
    this.binary = options.binary;
    this.clock = options.clock;
    this.command = path.basename(this.binary);
    this.deadlines = options.deadlines ?? DEFAULT_DEADLINES;
    this.slots = new Slots(options.maxProcesses ?? DEFAULT_MAX_PROCESSES);
    this.streamSlots = new Slots(options.maxStreams ?? DEFAULT_MAX_STREAMS);
    this.attemptSlots = new Slots(options.maxProcesses ?? DEFAULT_MAX_PROCESSES);
  }

  /** A runner of another binary on the same processes (`sync` beside a pull), with its own deadlines. */
  /** `<binary> <args>` as a service that lives on its own (lib/drivers/processes.ts `background`). */
  background(args: readonly string[], ended: (how: Background) => void): ReturnType<Processes['background']> {
    return this.options.processes.background({ binary: this.binary, args }, ended);
  }

  sibling(binary: string, deadlines?: CliOptions['deadlines']): Cli {
    return new Cli({ binary, processes: this.options.processes, clock: this.options.clock, deadlines, log: this.options.log });
  }

  /**
   * Runs the CLI with `args` and emits its stdout. Cold; unsubscribing kills it. It waits for one of the limited
   * slots, and is killed when it outlives its deadline, or, with `stallMs`, when it has read nothing for that long.
   */
  run(args: readonly string[], call: Call = {}): Observable<string> {
    return this.slots.run(this.launched(args, call));
  }

  /** How long a call of `kind` may take. */
  deadlineOf(kind: CallKind): number {
    return this.deadlines[kind];
  }

  /** The call's process started through the process driver, watched by its deadline and its stall. */
  private launched(args: readonly string[], { input, kind = 'command', deadlineMs, stallMs, progressPid, via, asked = args }: Call): Observable<string> {
    const deadline = deadlineMs ?? this.deadlines[kind];
    return new Observable<string>((subscriber) =>
      startSoon(() => {
        this.calls += 1;
        const started = this.clock.now();
        const subcommand = subcommandOf(args);
        let over = false;
        let leftovers: readonly string[] = [];
        const end = (outcome: 'ok' | 'failed' | 'deadline', result: { readonly text: string } | { readonly error: Error }) => {
          if (over) return;
          over = true;
          stopWatching();
          this.tell(asked, outcome, started, via);
          if ('error' in result) return subscriber.error(result.error);
          subscriber.next(result.text);
          subscriber.complete();
        };
        const launch = { binary: this.binary, args, input, maxStdout: MAX_OUTPUT_BYTES, maxStderr: MAX_ERROR_BYTES };
        const kill = this.options.processes.call(launch, (ending) => {
          this.options.leftovers?.remove(leftovers);
          if (ending.kind === 'exited' && ending.code === 0) end('ok', { text: ending.stdout.toString().replace(/\r?\n$/, '') });
          else end('failed', { error: this.failure(subcommand, ending) });
        });
        /** Kills it, noting first what it leaves behind, to be removed once it has ended. */
        const stop = (signal?: NodeJS.Signals) => {
          const pid = kill.pid();
          if (pid !== undefined && this.options.leftovers) leftovers = [...new Set([...leftovers, ...this.options.leftovers.of(pid)])];
          kill(signal);
        };
        // At the deadline the call is over for the agent, whatever the CLI (or what it started) still holds.
        const killed = (why: string) => {
          const message = `${this.command} ${subcommand} ${why} and was killed.`;
          this.options.log?.warn(message);
          stop('SIGKILL');
          end('deadline', { error: new CliError(message) });
        };
        const timer = setTimeout(() => killed(`did not finish within ${deadline / 1000} s`), deadline);
        const progressOf = progressPid === undefined ? kill.pid : () => progressPid;
        const watch = stallMs === undefined ? undefined : watchProgress(progressOf, stallMs, () => killed(`made no progress for ${stallMs / 1000} s`));
        const stopWatching = () => {
          clearTimeout(timer);
          clearInterval(watch);
        };
        return () => {
          over = true;
          stopWatching();
          stop();
        };
      }),
    );
  }

  /** The error of a call that did not end well, in the CLI's words where it said some. */
  private failure(subcommand: string, ending: Exclude<Ending, { kind: 'exited'; code: 0 }>): CliError {
    switch (ending.kind) {
      case 'not-run':
        return new (ending.missing ? NotInstalled : CliError)(`Cannot run ${this.command}: ${ending.message}`);
      case 'output-lost':
        return new CliError(`${this.command} ${subcommand} exited with ${ending.code}, but ${ending.message}`, ending.code);
      case 'too-much':
        return new CliError(`${this.command} ${subcommand} wrote more than ${MAX_OUTPUT_BYTES} bytes.`);
      default: {
        const said = ending.stderr
          .toString()
          .trim()
          .replace(/^Error: /, '');
        return new CliError(said || `${this.command} ${subcommand} failed with exit code ${ending.code}.`, ending.code);
      }
    }
  }

  /** Tells `observe` of a call that ended (one its caller made another way too, from `started`, as `clock` read it). */
  tell(args: readonly string[], outcome: 'ok' | 'failed' | 'deadline', started: number, via?: string): void {
    this.options.observe?.({ subcommand: subcommandOf(args), args, outcome, seconds: (this.clock.now() - started) / 1000, via });
  }

  /**
   * Runs the CLI with `args` and emits each line it writes on stdout or stderr as it comes; completes when it
   * ends; unsubscribing kills it. While `paused$` says true its output is not read: the pipes fill and it waits,
   * so what it prints costs the agent nothing until it is wanted. Of a line longer than `maxLineBytes` (what a
   * log response carries of one) only that much is kept. At most `maxStreams` run at once; more wait in line.
   */
  lines(args: readonly string[], paused$: Observable<boolean> = of(false), maxLineBytes = MAX_LINE_BYTES): Observable<string> {
    return this.streamSlots.run(this.counted(this.options.processes.lines({ binary: this.binary, args }, paused$, maxLineBytes)));
  }

  /**
   * Runs the CLI as a peer spoken to (a bus bridge): what `input$` gives is written to its stdin, its stdout
   * emitted as it comes, in chunks. A stream (the stream slots); it errors when the process ends, with the start
   * of what it said on stderr; unsubscribing kills it.
   */
  conversation(args: readonly string[], input$: Observable<string | Uint8Array>): Observable<Buffer> {
    return this.streamSlots.run(this.counted(this.options.processes.conversation({ binary: this.binary, args }, input$)));
  }

  /**
   * Runs the CLI with `args` in slots of their own (a slow attempt holds up no other call), its stdout and
   * stderr kept up to `keepBytes` each, and emits how it ended; at `timeoutMs` it is killed. Unsubscribing kills it.
   */
  attempt(args: readonly string[], timeoutMs: number, keepBytes: number, via?: string): Observable<Attempt> {
    return this.attemptSlots.run(
      new Observable<Attempt>((subscriber) =>
        startSoon(() => {
          this.calls += 1;
          const started = this.clock.now();
          const end = (attempt: Attempt, outcome: 'ok' | 'failed' | 'deadline') => {
            if (subscriber.closed) return;
            clearTimeout(deadline);
            this.tell(args, outcome, started, via);
            subscriber.next(attempt);
            subscriber.complete();
          };
          const kill = this.options.processes.piped({ binary: this.binary, args, maxStdout: keepBytes, maxStderr: keepBytes }, (ending) => {
            if (ending.kind === 'exited') {
              const output = Buffer.concat([ending.stdout, ending.stderr]).subarray(0, keepBytes).toString();
              end({ kind: 'exited', code: ending.code, output }, ending.code === 0 ? 'ok' : 'failed');
            } else end({ kind: 'not-run', output: `Cannot run ${this.command}: ${'message' in ending ? ending.message : ending.kind}` }, 'failed');
          });
          const deadline = setTimeout(() => {
            kill('SIGKILL');
            end({ kind: 'timed-out', output: '' }, 'deadline');
          }, timeoutMs);
          return () => {
            clearTimeout(deadline);
            kill('SIGKILL');
          };
        }),
      ),
    );
  }

  /** A stream's process counted among the CLI's, and its driver's error said as the CLI's. */
  private counted<T>(process$: Observable<T>): Observable<T> {
    return defer(() => {
      this.calls += 1;
      return process$.pipe(catchError((err: unknown) => throwError(() => new CliError(streamError(this.command, err as Error)))));
    });
  }
}

/** The subcommand of a call: its first word that is not an option. */
const subcommandOf = (args: readonly string[]) => args.find((a) => !a.startsWith('-')) ?? '';

/** A stream's end in the CLI's words: "Cannot run" when it never started (the driver says its end otherwise). */
const streamError = (command: string, err: Error) =>
  err instanceof ProcessEnded && err.started ? `${command} ${err.message}` : `Cannot run ${command}: ${err.message}`;

/**
 * Calls `stalled` once the process has read less than PROGRESS_BYTES in `stallMs` (its bytes read, looked at a
 * few times in that span; an idle Go program still reads a byte now and then, its own wake-ups).
 */
function watchProgress(pid: () => number | undefined, stallMs: number, stalled: () => void): NodeJS.Timeout {
  let base = 0;
  // Counted in looks, not read from a clock: the stall is `stallMs` of looks without progress.
  const everyMs = Math.min(5000, stallMs / 4);
  let looksWithout = 0;
  const watch = setInterval(() => {
    const p = pid();
    const read = p === undefined ? undefined : bytesRead(p);
    if (read !== undefined && read - base >= PROGRESS_BYTES) [base, looksWithout] = [read, 0];
    else if (++looksWithout * everyMs >= stallMs) {
      clearInterval(watch);
      stalled();
    }
  }, everyMs);
  return watch;
}
