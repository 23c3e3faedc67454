// The one port through which the agent runs processes: a call (input, output kept up to a limit, exit status; the
// caller kills it at its deadline), a stream of lines, a conversation, and a service that lives on its own (Podman's).
// Short calls go through the launcher's shell (lib/drivers/launcher.ts) so that the agent's own process does not
// fork for them; calls that must keep only part of a flood of output (a health check), and every call while the
// shell has no folder for its files, are spawned here with pipes. Made once by the run (bin/run.ts), which disposes
// it at its end.
import { type ChildProcess, spawn } from 'node:child_process';
import os from 'node:os';
import { Observable, of } from 'rxjs';
import { LogLines, MAX_LINE_BYTES } from '../log-lines.js';
import { Launcher, privateParent } from './launcher.js';
import type { Command, Ending, Kill, Launch } from './process-call.js';

export type { Command, Ending, Kill, Launch };

/** How a background process ended: by itself or a signal, or it could not be started. */
export type Background =
  | { readonly kind: 'exited'; readonly code: number | null; readonly signal: NodeJS.Signals | null }
  | { readonly kind: 'not-run'; readonly message: string };

/** A stream's or a conversation's process ended (`started`), or could not be started: the message says how. */
export class ProcessEnded extends Error {
  constructor(
    message: string,
    readonly started: boolean,
  ) {
    super(message);
  }
}

export interface ProcessesOptions {
  /** Where the shell's folder of call files is made (a private place: privateParent()). */
  readonly parent?: string;
  /** Told once why short calls are spawned directly (no folder for their files could be made). */
  readonly warn?: (text: string) => void;
}

export class Processes {
  private readonly shell: Launcher;
  /** The streams' and conversations' processes running: what the run's end stops, whoever still listens to them. */
  private readonly streams = new Set<ChildProcess>();

  constructor(options: ProcessesOptions = {}) {
    this.shell = new Launcher(options.parent ?? privateParent(), options.warn);
  }

  /** The launcher shell's pid, while one runs. */
  get shellPid(): number | undefined {
    return this.shell.shellPid;
  }

  /** Starts a short call; `done` is told once how it ended. Returns a kill that signals it while it runs. */
  call(launch: Launch, done: (ending: Ending) => void): Kill {
    if ([launch.binary, ...launch.args].some((word) => word.includes('\0'))) {
      queueMicrotask(() => done({ kind: 'not-run', message: 'an argument holds a NUL character.' }));
      return Object.assign(() => undefined, { pid: () => undefined });
    }
    return this.shell.ready() ? this.shell.launch(launch, done) : spawnCall(launch, done, false);
  }

  /**
   * Starts a call with pipes from the agent's own process: what it writes beyond the limits is read and
   * dropped, never kept nor failed (`too-much` is not told). A SIGKILL ends its pipes too.
   */
  piped(launch: Launch, done: (ending: Ending) => void): Kill {
    return spawnCall(launch, done, true);
  }

  /**
   * Each line the command writes on stdout or stderr, as it comes; completes when it ends; unsubscribing kills
   * it. While `paused$` says true its output is not read (its pipes fill and it waits). Of a line longer than
   * `maxLineBytes` only that much is kept (lib/log-lines.ts).
   */
  lines({ binary, args }: Command, paused$: Observable<boolean> = of(false), maxLineBytes = MAX_LINE_BYTES): Observable<string> {
    return new Observable<string>((subscriber) =>
      startSoon(() => {
        const child = this.track(spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
        child.on('error', (err) => subscriber.error(new ProcessEnded(err.message, false)));
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
        return () => {
          pausing.unsubscribe();
          // Nothing more is read, even if something the command started holds the pipes open.
          streams.forEach((stream) => stream.destroy());
          if (child.exitCode === null) child.kill('SIGKILL');
        };
      }),
    );
  }

  /**
   * A peer spoken to (a bus bridge): what `input$` gives is written to its stdin, its stdout emitted as it comes,
   * in chunks. It errors when the process ends, with the start of what it said on stderr; unsubscribing kills it.
   */
  conversation({ binary, args }: Command, input$: Observable<string | Uint8Array>): Observable<Buffer> {
    return new Observable<Buffer>((subscriber) =>
      startSoon(() => {
        const child = this.track(spawn(binary, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
        const said = new Kept(4096);
        child.on('error', (err) => subscriber.error(new ProcessEnded(err.message, false)));
        child.stdin.on('error', () => undefined);
        child.stdout.on('data', (chunk: Buffer) => subscriber.next(chunk));
        child.stderr.on('data', (chunk: Buffer) => said.add(chunk));
        child.on('close', (code, signal) =>
          subscriber.error(new ProcessEnded(`ended (${signal ?? `exit ${code}`})${said.bytes() > 0 ? `: ${said.all().toString().trim()}` : ''}`, true)),
        );
        const writing = input$.subscribe({ next: (bytes) => child.stdin.write(bytes) });
        return () => {
          writing.unsubscribe();
          // Its stdin closed too: a peer that outlives the kill (a bridge in another namespace) ends on EOF.
          child.stdin.destroy();
          child.stdout.destroy();
          if (child.exitCode === null) child.kill('SIGKILL');
        };
      }),
    );
  }

  /**
   * Starts a service that lives on its own (in a session of its own, not read, not waited for at the agent's exit:
   * a Podman service leaves by itself when idle, and the next agent finds it). `ended` is told once how it ended,
   * or why it could not start.
   */
  background({ binary, args }: Command, ended: (how: Background) => void): { readonly pid?: number; readonly kill: (signal: NodeJS.Signals) => void } {
    const child = spawn(binary, args, { detached: true, stdio: 'ignore' });
    child.unref();
    // A spawn that fails is told by 'error' alone; one that started, by 'exit'.
    child.on('error', (err) => ended({ kind: 'not-run', message: err.message }));
    child.on('exit', (code, signal) => ended({ kind: 'exited', code, signal }));
    return {
      pid: child.pid,
      kill: (signal) => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      },
    };
  }

  /**
   * Ends the launcher shell and removes its folder (a call still writing there leaves it to the next start's sweep),
   * and kills the streams still running: a `podman events` that a cache follows for a while after its last watcher
   * would outlive the agent.
   */
  dispose(): void {
    this.shell.dispose();
    for (const child of this.streams) child.kill('SIGKILL');
    this.streams.clear();
  }

  /** A stream's or a conversation's process, known until it exits. */
  private track<C extends ChildProcess>(child: C): C {
    this.streams.add(child);
    child.once('exit', () => this.streams.delete(child));
    child.once('error', () => this.streams.delete(child));
    return child;
  }
}

/**
 * Starts a process on the next turn of the event loop, so that one cancelled in the turn that asked for it (a log
 * request and its cancel read together) is never started. Returns the teardown.
 */
export function startSoon(start: () => () => void): () => void {
  let kill: (() => void) | undefined;
  const soon = setImmediate(() => {
    kill = start();
  });
  return () => {
    clearImmediate(soon);
    kill?.();
  };
}

/** A call started by the agent's process itself, its output read from pipes. `cut`: more output than kept is dropped, not failed. */
function spawnCall(launch: Launch, done: (ending: Ending) => void, cut: boolean): Kill {
  const { binary, args, input, maxStdout, maxStderr } = launch;
  let ended = false;
  const end = (ending: Ending) => {
    if (ended) return;
    ended = true;
    done(ending);
  };
  const child = spawn(binary, [...args], { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  const [stdout, stderr] = [new Kept(cut ? maxStdout : maxStdout + 1), new Kept(maxStderr)];
  child.stdout!.on('data', (chunk: Buffer) => stdout.add(chunk));
  child.stderr!.on('data', (chunk: Buffer) => stderr.add(chunk));
  child.stdin?.on('error', () => undefined).end(input);
  child.on('error', (err) => {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    end({ kind: 'not-run', message: `${binary}: ${missing ? 'not found' : err.message}`, missing });
  });
  child.on('close', (code, signal) => {
    const status = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
    end(!cut && stdout.bytes() > maxStdout ? { kind: 'too-much', code: status } : { kind: 'exited', code: status, stdout: stdout.all(), stderr: stderr.all() });
  });
  const kill = (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    // Killed for good: what it started may hold its pipes open, and nothing more of them is wanted.
    if (signal === 'SIGKILL') {
      child.stdout!.destroy();
      child.stderr!.destroy();
    }
  };
  return Object.assign(kill, { pid: () => (child.exitCode === null && child.signalCode === null ? child.pid : undefined) });
}

/** What a process wrote on a pipe, kept up to a limit (the rest is counted, not kept). */
export class Kept {
  private readonly chunks: Buffer[] = [];
  private count = 0;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    if (this.count < this.limit) this.chunks.push(chunk.subarray(0, this.limit - this.count));
    this.count += chunk.length;
  }

  bytes(): number {
    return this.count;
  }

  all(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
