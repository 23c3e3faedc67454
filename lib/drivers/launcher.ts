// The runtime CLIs' short calls (run, rm, ps, inspect, pull …) are started by one long-lived POSIX shell, so
// that the agent's own process never forks for them. A fork of a Node process of ~80 MiB copies its page
// tables and write-protects every page (each later write of the agent's faults), and libuv blocks the event
// loop until the child has exec'd, milliseconds on a busy machine; a fork of `sh` costs a fraction of that
// and blocks nothing here. It is one way of lib/drivers/processes.ts to make a call.
//
// A call is one line of shell, every word single-quoted, so no name or argument is ever read as shell:
//   { 'podman' 'ps' … <in >N.out 2>N.err & echo $! >N.pid || echo "N $!"; wait $!; s=$?; printf . >>N.out && printf . >>N.err || s=F$s; echo "N = $s"; } & jN=$!
// The subshell notes the command's pid in a file, read only when the agent signals the call (it says it on the
// shell's output where the file cannot be written), then says its exit status; the agent then has the shell reap
// the subshell and forget its pid (`wait "$jN"; unset jN`), so that no zombie, job or name stays. The shell keeps
// that pid, not the agent. So a call is one read of the shell's output, a wake of an agent that was idle, and, while
// others run, one write to it, a wake of the shell that costs the agent some tens of µs: the reaps of ended calls go
// with the next call's line, alone only when no call runs once the turn that ended them is over. Output goes
// through files of a private folder, read after the exit, in a place no other user can fill where there is one
// (/run as root). Podman and nerdctl exit 0 when their output cannot be written (a full disk): the shell's own
// mark after it tells output that was kept whole from output that was lost, which is never read as "nothing".
// Where no folder can be made at all (no space, no inodes, read-only), the calls are spawned directly, with pipes
// (lib/drivers/processes.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, lstatSync, mkdtempSync, openSync, readSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import type { Writable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import type { Ending, Kill, Launch } from './process-call.js';

interface Job {
  readonly launch: Launch;
  readonly done: (ending: Ending) => void;
  /** The command's pid, once read from its file or the shell's output. */
  pid?: number;
  /** A signal asked for before the pid was known: given once it is. */
  pending?: NodeJS.Signals;
  /** The command's exit status: once known the job ends. */
  status?: number;
  /** The shell could not mark the end of its output: what it wrote was not kept whole. */
  lost?: boolean;
  /** When it was given to the shell (performance.now()). */
  readonly submitted: number;
}

/** The byte the shell appends to a call's output files once the call has ended. */
const MARK = 0x2e;
const NOTHING = Buffer.alloc(0);

/** A shell that has not started a call within this long is stuck: it starts one in milliseconds. */
const STUCK_MS = 1000;
/** How soon a signal asked for before its call started looks again for the call's pid, and how seldom at most: each wait doubles. */
const PENDING_LOOKS = { firstMs: 10, mostMs: 1000 };

/** A word the shell reads as exactly these characters. */
const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

export class Launcher {
  private shell?: ChildProcess;
  private readonly jobs = new Map<number, Job>();
  private next = 0;
  private unread = '';
  /** The reaps of ended calls, not yet written to the shell. */
  private reaps = '';
  private folder?: string;
  /** Whether the parent was swept of the folders of agents killed before they could remove theirs. */
  private swept = false;
  private spawnsDirectly = false;

  /**
   * `parent`: where the folder of the calls' files is made; `warn`: told once why calls cannot go through the
   * shell (no folder for their files could be made).
   */
  constructor(
    private readonly parent: string,
    private readonly warn: (text: string) => void = () => undefined,
  ) {}

  /** The shell's pid, while one runs. */
  get shellPid(): number | undefined {
    return this.shell?.pid;
  }

  /**
   * Whether calls can go through the shell now: its private folder is there, made if need be (again, if a
   * cleaner of /tmp took it). When it cannot be made the reason is told once, until it can.
   */
  ready(): boolean {
    if (this.folder !== undefined && existsSync(this.folder)) return true;
    this.folder = undefined;
    try {
      this.sweep();
      this.folder = mkdtempSync(path.join(this.parent, `${FOLDER_PREFIX}${process.pid}-`));
      this.spawnsDirectly = false;
      return true;
    } catch (err) {
      if (!this.spawnsDirectly)
        this.warn(`Cannot make a folder for the runtime calls' output in ${this.parent} (${(err as Error).message}): they are started directly.`);
      this.spawnsDirectly = true;
      return false;
    }
  }

  /** Starts a command (ready() said yes); `done` is told once how it ended. Returns a kill that signals the command while it runs, and tells its pid once known. */
  launch(launch: Launch, done: (ending: Ending) => void): Kill {
    const id = this.next++;
    const job: Job = { launch, done, submitted: performance.now() };
    this.jobs.set(id, job);
    try {
      this.submit(id, job);
    } catch (err) {
      queueMicrotask(() => this.end(id, { kind: 'not-run', message: (err as Error).message }));
    }
    const running = () => this.jobs.has(id) && job.status === undefined;
    const kill = (signal: NodeJS.Signals = 'SIGTERM') => {
      if (!running()) return;
      const pid = this.pidOf(id, job);
      if (pid !== undefined) signalProcess(pid, signal);
      // Killed at its deadline and still not started: the shell is stuck (stopped, say). A new one takes the calls.
      else if (signal === 'SIGKILL' && performance.now() - job.submitted > STUCK_MS && this.shell?.pid !== undefined) signalProcess(this.shell.pid, 'SIGKILL');
      else {
        const looking = job.pending !== undefined;
        job.pending = signal;
        if (!looking) this.signalOnceStarted(id, job, running);
      }
    };
    return Object.assign(kill, { pid: () => (running() ? this.pidOf(id, job) : undefined) });
  }

  /** Ends the shell (its calls run on to their end, in a session of their own) and removes the folder. */
  dispose(): void {
    this.shell?.stdin?.end();
    this.shell = undefined;
    if (this.folder !== undefined) removeQuietly(this.folder);
    this.folder = undefined;
  }

  /** The pid of a call's command, once its subshell has noted it (a file of its own, or a line on the shell's output). */
  private pidOf(id: number, job: Job): number | undefined {
    if (job.pid !== undefined) return job.pid;
    try {
      const noted = /^(\d+)\n$/.exec(readStart(this.file(id, 'pid'), 32).toString('latin1'))?.[1];
      if (noted !== undefined) job.pid = Number(noted);
    } catch {
      // Not readable (its folder gone): not known yet.
    }
    return job.pid;
  }

  /**
   * Gives the call its pending signal once its pid is known, looking again while it has not ended: soon, then less
   * and less often (a stuck shell costs a look a second).
   */
  private signalOnceStarted(id: number, job: Job, running: () => boolean): void {
    const look = (waitMs: number) => {
      if (!running() || job.pending === undefined) return;
      if (this.pidOf(id, job) === undefined) return void setTimeout(() => look(Math.min(2 * waitMs, PENDING_LOOKS.mostMs)), waitMs).unref();
      givePending(job);
    };
    look(PENDING_LOOKS.firstMs);
  }

  /** The first time: removes the folders in the parent left by agents killed before they could remove theirs. */
  private sweep(): void {
    if (this.swept) return;
    this.swept = true;
    for (const name of readdirSync(this.parent)) {
      const pid = name.startsWith(FOLDER_PREFIX) ? Number.parseInt(name.slice(FOLDER_PREFIX.length), 10) : Number.NaN;
      if (pid > 0 && !alive(pid)) removeStale(path.join(this.parent, name));
    }
  }

  private submit(id: number, job: Job): void {
    const input = job.launch.input;
    if (input !== undefined) writeFileSync(this.file(id, 'in'), input, { mode: 0o600 });
    const command = [job.launch.binary, ...job.launch.args].map(quote).join(' ');
    const [stdin, stdout, stderr] = [input === undefined ? '/dev/null' : this.file(id, 'in'), this.file(id, 'out'), this.file(id, 'err')].map(quote);
    this.write(
      `{ ${command} <${stdin} >${stdout} 2>${stderr} & echo $! >${quote(this.file(id, 'pid'))} || echo "${id} $!"; wait $!; s=$?; printf . >>${stdout} && printf . >>${stderr} || s=F$s; echo "${id} = $s"; } & j${id}=$!\n`,
    );
  }

  /** A file of a call in the private folder. */
  private file(id: number, ext: 'in' | 'out' | 'err' | 'pid'): string {
    return path.join(this.folder!, `${id}.${ext}`);
  }

  /** Gives the shell a line, the reaps not yet written first. */
  private write(line: string): void {
    const reaps = this.reaps;
    this.reaps = '';
    this.shellIn().write(reaps + line);
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
        this.reaps = '';
        for (const id of [...this.jobs.keys()]) this.end(id, { kind: 'not-run', message: why });
      };
      shell.on('error', (err) => gone(`/bin/sh: ${err.message}`));
      shell.on('exit', () => gone('the shell that starts it ended.'));
    }
    return this.shell.stdin!;
  }

  /** What the subshell of call N says: `N = STATUS` (ended), after `N PID` (started) where it could not note the pid in its file. */
  private read(text: string): void {
    const lines = (this.unread + text).split('\n');
    this.unread = lines.pop() ?? '';
    for (const line of lines) {
      const [idText, what, value] = line.split(' ');
      const id = Number(idText);
      const job = this.jobs.get(id);
      if (job === undefined) continue;
      if (what === '=') {
        job.status = Number(value.replace(/^F/, ''));
        job.lost = value.startsWith('F');
      } else {
        job.pid = Number(what);
        givePending(job);
      }
      if (job.status !== undefined) this.collect(id, job);
    }
    if (this.reaps !== '' && this.jobs.size === 0) setImmediate(() => this.reapIdle());
  }

  /** No call runs, and none started in this turn to carry the reaps: they go alone, so that no zombie or name stays. */
  private reapIdle(): void {
    if (this.reaps !== '' && this.jobs.size === 0 && this.shell !== undefined) this.write('');
  }

  /** The command and its subshell have ended: the subshell is reaped, the output read, the files removed. */
  private collect(id: number, job: Job): void {
    this.reaps += `wait "$j${id}"; unset j${id}\n`;
    const code = job.status!;
    // Read at once: files just written are in the page cache, and a thread-pool round trip costs more.
    try {
      // Each file ends in the shell's mark when all the command wrote was kept (the mark is not part of it).
      const stdout = readStart(this.file(id, 'out'), job.launch.maxStdout + 2);
      // What a call said on stderr is read only when it failed: nobody reads a success's, and the shell's marks
      // after it (`lost` otherwise) tell whether its output could be written.
      const stderr = code === 0 ? NOTHING : readStart(this.file(id, 'err'), job.launch.maxStderr + 1);
      const whole = !job.lost && stdout.at(-1) === MARK && (code === 0 || stderr.at(-1) === MARK || stderr.length > job.launch.maxStderr);
      const said = stderr.subarray(0, Math.min(stderr.length - (stderr.at(-1) === MARK ? 1 : 0), job.launch.maxStderr));
      const shellSaid = /^\S*sh: \d+: (.*)/.exec(said.toString())?.[1];
      // 127: the shell found no such command; 126: it found one it cannot run.
      if ((code === 126 || code === 127) && shellSaid !== undefined) this.end(id, { kind: 'not-run', message: shellSaid.trim(), missing: code === 127 });
      else if (stdout.length > job.launch.maxStdout + 1) this.end(id, { kind: 'too-much', code });
      else if (!whole) this.end(id, { kind: 'output-lost', code, message: `its output could not be kept whole in ${this.folder} (is its file system full?).` });
      else this.end(id, { kind: 'exited', code, stdout: stdout.subarray(0, -1), stderr: said });
    } catch (err) {
      this.end(id, { kind: 'output-lost', code, message: `its output could not be read: ${(err as Error).message}` });
    }
  }

  private end(id: number, ending: Ending): void {
    const job = this.jobs.get(id);
    if (job === undefined) return;
    this.jobs.delete(id);
    // Whatever the shell got to, its files go (a call it never started has none to find).
    const files = job.launch.input === undefined ? (['out', 'err', 'pid'] as const) : (['in', 'out', 'err', 'pid'] as const);
    if (this.folder !== undefined) for (const ext of files) removeFile(this.file(id, ext));
    job.done(ending);
  }
}

/**
 * Where the calls' folder is made: a place no other user can fill where there is one (/run as root, else the
 * user's runtime folder), else the temporary folder.
 */
export function privateParent(): string {
  const uid = process.getuid?.();
  for (const candidate of uid === 0 ? ['/run'] : [process.env.XDG_RUNTIME_DIR ?? '']) {
    try {
      const stat = lstatSync(candidate);
      if (stat.isDirectory() && stat.uid === uid && (stat.mode & 0o022) === 0) return candidate;
    } catch {
      // Not there.
    }
  }
  return os.tmpdir();
}

const FOLDER_PREFIX = 'ank-agent-calls-';

/**
 * The folder removed at the end; one a call still running writes into (ENOTEMPTY) is left to the sweep of the next
 * start, never a stack trace at the exit.
 */
function removeQuietly(folder: string): void {
  try {
    rmSync(folder, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    // Swept at the next start.
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

/** Gives a call the signal asked for before its pid was known, once it is. */
function givePending(job: Job): void {
  if (job.pending === undefined || job.pid === undefined) return;
  signalProcess(job.pid, job.pending);
  job.pending = undefined;
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
