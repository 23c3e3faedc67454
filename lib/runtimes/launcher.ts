// The runtime CLIs' short calls (run, rm, ps, inspect, pull …) are started by one long-lived POSIX shell, so
// that the agent's own process never forks for them. A fork of a Node process of ~80 MiB copies its page
// tables and write-protects every page (each later write of the agent's faults), and libuv blocks the event
// loop until the child has exec'd, milliseconds on a busy machine; a fork of `sh` costs a fraction of that
// and blocks nothing here. Streams (events, logs) and health checks still spawn directly: they need pipes.
//
// A call is one line of shell, every word single-quoted, so no name or argument is ever read as shell:
//   { 'podman' 'ps' … <in >N.out 2>N.err & echo "N $!"; wait $!; echo "N = $?"; } & echo "N s $!"
// The shell says the command's pid (to kill it), then its exit status; the agent then has the shell reap the
// subshell (`wait`), so no zombie stays. Output goes through files of a private folder, read after the exit.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, lstatSync, mkdtempSync, openSync, readSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import type { Writable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';

/** How a launched command ended: its exit status and the start of what it wrote. */
export type Ending =
  | { readonly kind: 'exited'; readonly code: number; readonly stdout: Buffer; readonly stderr: Buffer }
  /** It wrote more on stdout than the caller keeps. */
  | { readonly kind: 'too-much'; readonly code: number }
  /** It could not be started at all. */
  | { readonly kind: 'not-run'; readonly message: string };

export interface Launch {
  readonly binary: string;
  readonly args: readonly string[];
  /** Given on its stdin; otherwise stdin is /dev/null. */
  readonly input?: string;
  /** Bytes of stdout kept at most; more ends the call as `too-much`. */
  readonly maxStdout: number;
  /** Bytes of stderr kept (the rest is not read). */
  readonly maxStderr: number;
}

interface Job {
  readonly launch: Launch;
  readonly done: (ending: Ending) => void;
  /** The command's pid, once the shell said it. */
  pid?: number;
  /** A signal asked for before the pid was known. */
  pending?: NodeJS.Signals;
  /** The subshell that waits for the command, and the command's exit status: once both are known the job ends. */
  subshell?: number;
  status?: number;
  /** When it was given to the shell (performance.now()). */
  readonly submitted: number;
}

/** A shell that has not started a call within this long is stuck: it starts one in milliseconds. */
const STUCK_MS = 1000;

/** A word the shell reads as exactly these characters. */
const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

export class Launcher {
  private shell?: ChildProcess;
  private readonly jobs = new Map<number, Job>();
  private next = 0;
  private unread = '';
  private folder?: string;

  /** `parent`: where the folder of the calls' files is made. */
  constructor(private readonly parent = os.tmpdir()) {}

  /** The shell's pid, while one runs. */
  get shellPid(): number | undefined {
    return this.shell?.pid;
  }

  /** Starts a command; `done` is told once how it ended. Returns a kill that signals the command while it runs. */
  launch(launch: Launch, done: (ending: Ending) => void): (signal?: NodeJS.Signals) => void {
    if ([launch.binary, ...launch.args].some((word) => word.includes('\0'))) {
      queueMicrotask(() => done({ kind: 'not-run', message: 'an argument holds a NUL character.' }));
      return () => undefined;
    }
    const id = this.next++;
    const job: Job = { launch, done, submitted: performance.now() };
    this.jobs.set(id, job);
    try {
      this.submit(id, job);
    } catch (err) {
      queueMicrotask(() => this.end(id, { kind: 'not-run', message: (err as Error).message }));
    }
    return (signal = 'SIGTERM') => {
      if (!this.jobs.has(id) || job.status !== undefined) return;
      if (job.pid !== undefined) signalProcess(job.pid, signal);
      // Killed at its deadline and still not started: the shell is stuck (stopped, say). A new one takes the calls.
      else if (signal === 'SIGKILL' && performance.now() - job.submitted > STUCK_MS && this.shell?.pid !== undefined) signalProcess(this.shell.pid, 'SIGKILL');
      else job.pending = signal;
    };
  }

  private submit(id: number, job: Job): void {
    // A cleaner of /tmp may have taken the folder: the calls go on in a new one.
    if (this.folder !== undefined && !existsSync(this.folder)) this.folder = undefined;
    const input = job.launch.input;
    if (input !== undefined) writeFileSync(this.file(id, 'in'), input, { mode: 0o600 });
    const command = [job.launch.binary, ...job.launch.args].map(quote).join(' ');
    const [stdin, stdout, stderr] = [input === undefined ? '/dev/null' : this.file(id, 'in'), this.file(id, 'out'), this.file(id, 'err')].map(quote);
    this.shellIn().write(`{ ${command} <${stdin} >${stdout} 2>${stderr} & echo "${id} $!"; wait $!; echo "${id} = $?"; } & echo "${id} s $!"\n`);
  }

  /** A file of a call in the private folder (made on first use, again if something removed it; removed when the agent ends). */
  private file(id: number, ext: 'in' | 'out' | 'err'): string {
    if (this.folder === undefined) {
      this.folder = mkdtempSync(path.join(this.parent, `${FOLDER_PREFIX}${process.pid}-`));
      removedAtExit(this.folder, this.parent);
    }
    return path.join(this.folder, `${id}.${ext}`);
  }

  private shellIn(): Writable {
    if (this.shell === undefined) {
      // A session of its own: a Ctrl-C at the agent's terminal (SIGINT to its process group) is the agent's to
      // answer, and the calls in flight (the deletes of --delete-on-exit among them) run on to their end.
      const shell = spawn('/bin/sh', [], { stdio: ['pipe', 'pipe', 'ignore'], detached: true });
      this.shell = shell;
      // The shell keeps nothing alive: a call waiting on it has its own deadline timer.
      shell.unref();
      for (const pipe of [shell.stdin, shell.stdout] as unknown as Array<{ unref?: () => void }>) pipe.unref?.();
      shell.stdin!.on('error', () => undefined);
      shell.stdout!.setEncoding('latin1').on('data', (text: string) => this.read(text));
      const gone = (why: string) => {
        if (this.shell !== shell) return;
        this.shell = undefined;
        this.unread = '';
        for (const id of [...this.jobs.keys()]) this.end(id, { kind: 'not-run', message: why });
      };
      shell.on('error', (err) => gone(`/bin/sh: ${err.message}`));
      shell.on('exit', () => gone('the shell that starts it ended.'));
    }
    return this.shell.stdin!;
  }

  /** What the shell says: `N PID` (started), `N = STATUS` (ended), `N s PID` (its subshell). */
  private read(text: string): void {
    const lines = (this.unread + text).split('\n');
    this.unread = lines.pop() ?? '';
    for (const line of lines) {
      const [idText, what, value] = line.split(' ');
      const id = Number(idText);
      const job = this.jobs.get(id);
      if (job === undefined) continue;
      if (what === 's') job.subshell = Number(value);
      else if (what === '=') job.status = Number(value);
      else {
        job.pid = Number(what);
        if (job.pending) signalProcess(job.pid, job.pending);
      }
      if (job.subshell !== undefined && job.status !== undefined) this.collect(id, job);
    }
  }

  /** The command and its subshell have ended: the subshell is reaped, the output read, the files removed. */
  private collect(id: number, job: Job): void {
    this.shell?.stdin?.write(`wait ${job.subshell}\n`);
    const code = job.status!;
    // Read at once: files just written are in the page cache, and a thread-pool round trip costs more.
    try {
      const stdout = readStart(this.file(id, 'out'), job.launch.maxStdout + 1);
      const stderr = code === 0 ? Buffer.alloc(0) : readStart(this.file(id, 'err'), job.launch.maxStderr);
      const shellSaid = /^\S*sh: \d+: (.*)/.exec(stderr.toString())?.[1];
      if ((code === 126 || code === 127) && shellSaid !== undefined) this.end(id, { kind: 'not-run', message: shellSaid.trim() });
      else this.end(id, stdout.length > job.launch.maxStdout ? { kind: 'too-much', code } : { kind: 'exited', code, stdout, stderr });
    } catch (err) {
      this.end(id, { kind: 'not-run', message: `its output could not be read: ${(err as Error).message}` });
    }
  }

  private end(id: number, ending: Ending): void {
    const job = this.jobs.get(id);
    if (job === undefined) return;
    this.jobs.delete(id);
    const files = job.launch.input === undefined ? (['out', 'err'] as const) : (['in', 'out', 'err'] as const);
    for (const ext of files) removeFile(this.file(id, ext));
    job.done(ending);
  }
}

/** The one launcher of the agent's process. */
export const launcher = new Launcher();

const FOLDER_PREFIX = 'ank-agent-calls-';
const foldersMade: string[] = [];
const sweptParents = new Set<string>();

/** Removes the folder when the process exits; the first time in a parent, the folders left there by agents killed before they could exit. */
function removedAtExit(folder: string, parent: string): void {
  if (foldersMade.length === 0) process.once('exit', () => foldersMade.forEach((made) => rmSync(made, { recursive: true, force: true })));
  foldersMade.push(folder);
  if (sweptParents.has(parent)) return;
  sweptParents.add(parent);
  for (const name of readdirSync(parent)) {
    const pid = name.startsWith(FOLDER_PREFIX) ? Number.parseInt(name.slice(FOLDER_PREFIX.length), 10) : Number.NaN;
    if (pid > 0 && !alive(pid)) removeStale(path.join(parent, name));
  }
}

/** Removes a folder of this user's (never a link, never another user's). */
function removeStale(folder: string): void {
  try {
    const stat = lstatSync(folder);
    if (stat.isDirectory() && stat.uid === process.getuid?.()) rmSync(folder, { recursive: true, force: true });
  } catch {
    // Gone meanwhile.
  }
}

/** Whether a process of this pid runs (another user's counts). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The first `limit` bytes of a file; none when the command was killed before its shell made the file. */
function readStart(file: string, limit: number): Buffer {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
    throw err;
  }
  try {
    const size = Math.min(limit, fstatSync(fd).size);
    if (size === 0) return Buffer.alloc(0);
    const buffer = Buffer.allocUnsafe(size);
    return buffer.subarray(0, readSync(fd, buffer, 0, size, 0));
  } finally {
    closeSync(fd);
  }
}

/** Signals a process that may have ended meanwhile. */
function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // It has ended.
  }
}

/** Removes a file that may not have been made (the call was refused before it started). */
function removeFile(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // Not there.
  }
}
