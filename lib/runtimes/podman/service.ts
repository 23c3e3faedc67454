// A warm Podman: the engine kept running as `podman system service` and asked over its socket, so that a call
// does not pay a Podman process's start (its configuration, storage and database loaded anew): started, found,
// watched and replaced here; which call goes which way is ./podman-cli.ts's.
import { lstatSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Observable, Subject } from 'rxjs';
import type { Logger } from '../../logger.js';
import { ownArgv, processWork } from '../../drivers/machine.js';
import { ping } from './libpod.js';
import type { Cli } from '../base/cli.js';
import { type Plan, type ServiceWay, serviceProcess } from './podman-cli.js';

/** Where a Podman run by the system (its socket unit) listens, as root. */
export const SYSTEM_SOCKET = '/run/podman/podman.sock';
/** How long the agent's own service stays without a request before it leaves (it is started again when needed). */
export const SERVICE_IDLE_S = 60;
/** How long a service may take from its start to its first answer before the start counts as failed. */
const START_WITHIN_MS = 5000;
/** The wait before a failed service is started again, doubled at each failure up to the most. */
const RETRY_MS = { first: 1000, most: 5 * 60_000 };
/** How long a service that works but answers no ping is waited for before it counts as lost. */
const BUSY_FOR_MS = 10_000;
/**
 * How many calls in a row may fail by their way while the service answers its ping before it counts as lost: a
 * service that answers pings and cuts every other answer (and Podman's remote client then spins for ever) is no
 * service to ask.
 */
const LOST_AFTER_FAILURES = 3;
/** A unix socket's path has room for 107 bytes. */
const MAX_SOCKET_PATH = 107;

/** Options of a subcommand that Podman 4's remote client does not have: a call with one goes to the local CLI. */
const LOCAL_ONLY: Readonly<Record<string, readonly string[]>> = {
  run: ['--conmon-pidfile', '--env-host', '--http-proxy', '--pidfile', '--preserve-fds'],
  'kube play': ['--build', '--cert-dir', '--configmap', '--context-dir', '--seccomp-profile-root'],
  pull: ['--cert-dir'],
  exec: ['--preserve-fds'],
};

/** What the remote client says when it cannot reach the service or the service went under it. */
const LOST_WORDS = /unable to connect to Podman|Cannot connect to Podman|dial unix|connection (refused|reset)|broken pipe|unexpected EOF|: EOF\b/;

export interface ServiceOptions {
  /** The Podman CLI, on the run's processes: the service is started through it. */
  readonly cli: Pick<Cli, 'background' | 'clock'>;
  /** The agent's own folder, where its service's socket goes; without one only the system's socket is used. */
  readonly folder?: string;
  /** The system's socket, used where it answers as Podman (SYSTEM_SOCKET unless given). */
  readonly systemSocket?: string;
  readonly log: Logger;
  /** --debug=podman: what the service does. */
  readonly note?: (text: string) => void;
}

type State =
  | { readonly kind: 'off'; readonly retryAt: number; readonly why: string }
  | { readonly kind: 'starting' }
  | { readonly kind: 'up'; readonly socket: string; readonly pid?: number }
  /** No service can be had here (the socket's path is too long): every call goes locally. */
  | { readonly kind: 'never'; readonly why: string };

/** How a CLI call goes: through the service by the remote client (`args`, and whose reads are a download's progress), or locally and why. */

export class PodmanService implements ServiceWay {
  private state: State = { kind: 'off', retryAt: 0, why: 'the service is not started yet' };
  /** The wait before the next start after a failure: doubled by each failure in a row, set back when it is up. */
  private retryMs = RETRY_MS.first;
  private child?: ReturnType<Cli['background']>;
  /** Since when the service has not answered a ping (undefined while it answers). */
  private unansweredSince?: number;
  /** The calls through the service that failed by their way since the last that came back. */
  private failedInARow = 0;
  private readonly ownSocket?: string;
  private readonly downs = new Subject<string>();
  /** Why, each time the service goes down: the calls still going through it are lost. */
  readonly down$: Observable<string> = this.downs.asObservable();

  /** The run's clock (ms), as its CLI's. */
  private readonly now = (): number => this.options.cli.clock.now();

  constructor(private readonly options: ServiceOptions) {
    this.ownSocket = options.folder && path.join(options.folder, 'podman.sock');
    if (this.ownSocket && this.ownSocket.length > MAX_SOCKET_PATH && !isSocket(options.systemSocket ?? SYSTEM_SOCKET)) {
      this.state = { kind: 'never', why: `the socket path '${this.ownSocket}' is longer than ${MAX_SOCKET_PATH} bytes` };
    }
  }

  /** The socket calls go to while the service is up. */
  get socket(): string | undefined {
    return this.state.kind === 'up' ? this.state.socket : undefined;
  }

  /** Starts the service unless it is up, starting, or waiting to be started again. */
  warm(): void {
    if (this.state.kind === 'off' && this.now() >= this.state.retryAt) this.start();
  }

  /** The service's socket (and its process, where the agent started it) while it is up; else why not, and it is started. */
  reach(): { readonly socket: string; readonly pid?: number } | { readonly why: string } {
    const state = this.state;
    if (state.kind === 'up') return state;
    this.warm();
    return { why: state.kind === 'starting' ? 'the service is starting' : state.why };
  }

  plan(args: readonly string[]): Plan {
    const reach = this.reach();
    if ('why' in reach) return { via: 'cli', why: reach.why };
    const why = localReason(args);
    return why ? { via: 'cli', why } : { via: 'service', args: ['--remote', `--url=unix://${reach.socket}`, ...args], progressPid: reach.pid };
  }

  /** Whether a remote call's failure says the way is gone (not the engine's answer). */
  lost(message: string): boolean {
    return LOST_WORDS.test(message);
  }

  /** A call through the service came back: its answers are whole. */
  answered(): void {
    this.failedInARow = 0;
  }

  /**
   * A call through the service failed by its way or ran long: when the service does not answer now, it is
   * replaced; so it is at once when `broken` (it cut an answer it began), and after LOST_AFTER_FAILURES such calls
   * in a row, though it answers its ping.
   */
  failed(why: string, broken = false): void {
    const state = this.state;
    if (state.kind !== 'up') return;
    this.failedInARow += 1;
    if (broken || this.failedInARow >= LOST_AFTER_FAILURES) {
      this.down(state, broken ? `it cut an answer (${why})` : `${this.failedInARow} calls in a row failed by their way (${why})`);
      return;
    }
    this.alive(1000).then((alive) => {
      if (alive || this.state !== state) return;
      this.down(state, `it failed a call (${why}) and does not answer`);
    });
  }

  /**
   * Whether the service answers its ping within `withinMs`, or, where its process is known, works on: a service
   * busy with a burst of creates may answer late, and one killed then would leave its creates half made. One
   * that works on without an answer for BUSY_FOR_MS is taken as lost all the same (it may spin on a lock).
   */
  async alive(withinMs: number): Promise<boolean> {
    const state = this.state;
    if (state.kind !== 'up') return false;
    const before = state.pid === undefined ? undefined : processWork(state.pid);
    if (await ping(state.socket, withinMs)) {
      this.unansweredSince = undefined;
      return true;
    }
    this.unansweredSince ??= this.now() - withinMs;
    const after = state.pid === undefined ? undefined : processWork(state.pid);
    const works = before !== undefined && after !== undefined && !after.stopped && after.cpuTicks > before.cpuTicks;
    return works && this.now() - this.unansweredSince < BUSY_FOR_MS;
  }

  /** The service is gone: ours is killed (a stalled one may hold Podman's locks), and started again after a wait. */
  private down(state: Extract<State, { kind: 'up' }>, why: string): void {
    this.options.log.warn(`The Podman service at '${state.socket}' is replaced: ${why}; calls go to the Podman CLI meanwhile.`);
    if (state.pid !== undefined) {
      try {
        process.kill(state.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    this.off(why, true);
    this.downs.next(why);
  }

  private off(why: string, failed: boolean): void {
    const retryAt = failed ? this.now() + this.retryMs : 0;
    if (failed) this.retryMs = Math.min(RETRY_MS.most, this.retryMs * 2);
    this.state = { kind: 'off', retryAt, why: `the service is down: ${why}` };
    this.options.note?.(`service down: ${why}`);
  }

  /** The system's service where it answers as Podman; else one the agent left before; else a new one of its own. */
  private start(): void {
    this.state = { kind: 'starting' };
    const system = this.options.systemSocket ?? SYSTEM_SOCKET;
    const own = this.ownSocket;
    (async () => {
      if (isSocket(system) && (await ping(system, 1000))) return this.up(system, undefined, 'the system service');
      if (!own) return this.off(`no system service answers at '${system}'`, true);
      if (isSocket(own) && (await ping(own, 1000))) return this.up(own, servicePid(own), 'a service started earlier');
      this.launch(own);
    })().catch((err: unknown) => this.off(`it could not be started: ${(err as Error).message}`, true));
  }

  /**
   * The run is over: the service the agent started for it is stopped (SIGTERM: Podman's own way out; the
   * containers run on under their conmons), and none is started again. The system's service, or one an agent
   * that ended without its dispose left, is not the run's, and stays.
   */
  dispose(): void {
    const child = this.child;
    this.child = undefined;
    this.state = { kind: 'off', retryAt: Number.POSITIVE_INFINITY, why: 'the run is over' };
    child?.kill('SIGTERM');
  }

  private launch(socket: string): void {
    // A start under way when the run ended launches nothing.
    if (this.state.kind !== 'starting') return;
    let waiting = true;
    const child = serviceProcess(this.options.cli, socket, SERVICE_IDLE_S, (how) => {
      waiting = false;
      if (how.kind === 'not-run') return this.off(`it could not be started: ${how.message}`, true);
      if (this.child !== child) return;
      this.child = undefined;
      const state = this.state;
      // Leaving when idle is its way; the next call starts it again.
      if (state.kind === 'up' && state.pid === child.pid && how.code === 0) this.off('it left when idle', false);
      else if (state.kind !== 'off') this.off(`it ended (${how.signal ?? `exit code ${how.code}`})`, true);
    });
    this.child = child;
    if (child.pid !== undefined) writePid(socket, child.pid);
    const since = this.now();
    const wait = async (): Promise<void> => {
      while (waiting && this.now() - since < START_WITHIN_MS) {
        if (await ping(socket, 500)) return this.up(socket, child.pid, 'a service of its own');
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      if (!waiting) return;
      child.kill('SIGKILL');
      this.off(`it did not answer within ${START_WITHIN_MS / 1000} s of its start`, true);
    };
    void wait();
  }

  private up(socket: string, pid: number | undefined, what: string): void {
    if (this.state.kind !== 'starting') return;
    this.state = { kind: 'up', socket, pid };
    this.unansweredSince = undefined;
    this.failedInARow = 0;
    this.retryMs = RETRY_MS.first;
    this.options.note?.(`service up: ${what} at '${socket}'${pid === undefined ? '' : ` (pid ${pid})`}`);
  }
}

/** Why a call goes to the local CLI whatever the service: general options (another storage), or an option the remote client lacks. */
function localReason(args: readonly string[]): string | undefined {
  if (args.length === 0 || args[0].startsWith('-')) return 'general options choose the storage';
  // Measured on Podman 4.3: 25 execs through the service leave 25 sessions in the container's record, and
  // there is no call that removes one; a health check a second would add 86 400 a day.
  if (args[0] === 'exec') return 'the service keeps every exec session';
  const subcommand = args[0] === 'kube' || args[0] === 'image' || args[0] === 'pod' || args[0] === 'volume' ? `${args[0]} ${args[1]}` : args[0];
  const option = LOCAL_ONLY[subcommand]?.find((o) => args.some((a) => a === o || a.startsWith(`${o}=`)));
  return option && `the remote client has no ${option}`;
}

function isSocket(file: string): boolean {
  try {
    return lstatSync(file).isSocket();
  } catch {
    return false;
  }
}

/**
 * The pid of the service the agent started earlier on `socket`, when that process still is one, of the agent's own
 * user: another user's process that took the pid, whatever its argv, is never the one the agent kills.
 */
function servicePid(socket: string): number | undefined {
  try {
    const pid = Number(readFileSync(`${socket}.pid`, 'utf8'));
    const command = Number.isInteger(pid) && pid > 0 ? ownArgv(pid) : undefined;
    return command?.includes('service') && command.includes(`unix://${socket}`) ? pid : undefined;
  } catch {
    return undefined;
  }
}

function writePid(socket: string, pid: number): void {
  try {
    writeFileSync(`${socket}.pid`, String(pid), { mode: 0o600 });
  } catch {
    // Without it a later agent finds the service but cannot replace it when it stalls.
  }
}
