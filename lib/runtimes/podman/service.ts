// A warm Podman: the engine kept running as `podman system service` and asked over its socket, so that a call
// does not pay a Podman process's start (its configuration, storage and database loaded anew). Creates keep
// the CLI's grammar (`podman --remote run …` with the workload's options as given), lists, figures and image
// checks go by REST; health checks (`exec`) and what the remote client cannot do go to the local CLI, and so does every call while the service is
// starting, gone or stalled. The event stream and conmon's exit files stay local: they are the source of states.
import { type ChildProcess, spawn } from 'node:child_process';
import { lstatSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Logger } from '../../logger.js';
import { processWork } from '../../drivers/machine.js';
import { type CallRoute, CliError, type Plan, RouteLost } from '../base/cli.js';

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
/** A unix socket's path has room for 107 bytes. */
const MAX_SOCKET_PATH = 107;
/** The most a REST answer may hold (as the CLI's output). */
const MAX_ANSWER_BYTES = 64 * 2 ** 20;

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
  /** The Podman CLI (`podman`, or a path). */
  readonly binary: string;
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

export class PodmanService implements CallRoute {
  private state: State = { kind: 'off', retryAt: 0, why: 'the service is not started yet' };
  /** The wait before the next start after a failure: doubled by each failure in a row, set back when it is up. */
  private retryMs = RETRY_MS.first;
  private child?: ChildProcess;
  /** Since when the service has not answered a ping (undefined while it answers). */
  private unansweredSince?: number;
  private readonly ownSocket?: string;

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
    if (this.state.kind === 'off' && Date.now() >= this.state.retryAt) this.start();
  }

  plan(args: readonly string[]): Plan {
    const state = this.state;
    if (state.kind !== 'up') {
      this.warm();
      return { via: 'cli', why: state.kind === 'starting' ? 'the service is starting' : state.why };
    }
    const why = localReason(args);
    if (why) return { via: 'cli', why };
    const answer = restAnswer(state.socket, args);
    if (answer) return { via: 'service', answer };
    return { via: 'service', args: ['--remote', '--url', `unix://${state.socket}`, ...args], progressPid: state.pid };
  }

  lost(message: string): boolean {
    return LOST_WORDS.test(message);
  }

  /** A call through the service failed by its way or ran long: when the service does not answer now, it is replaced. */
  failed(why: string): void {
    const state = this.state;
    if (state.kind !== 'up') return;
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
    this.unansweredSince ??= Date.now() - withinMs;
    const after = state.pid === undefined ? undefined : processWork(state.pid);
    const works = before !== undefined && after !== undefined && !after.stopped && after.cpuTicks > before.cpuTicks;
    return works && Date.now() - this.unansweredSince < BUSY_FOR_MS;
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
  }

  private off(why: string, failed: boolean): void {
    const retryAt = failed ? Date.now() + this.retryMs : 0;
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

  private launch(socket: string): void {
    const child = spawn(this.options.binary, ['system', 'service', `--time=${SERVICE_IDLE_S}`, `unix://${socket}`], {
      detached: true,
      stdio: 'ignore',
    });
    this.child = child;
    child.unref();
    let waiting = true;
    child.on('error', (err) => {
      waiting = false;
      this.off(`it could not be started: ${err.message}`, true);
    });
    child.on('exit', (code, signal) => {
      waiting = false;
      if (this.child !== child) return;
      this.child = undefined;
      const state = this.state;
      // Leaving when idle is its way; the next call starts it again.
      if (state.kind === 'up' && state.pid === child.pid && code === 0) this.off('it left when idle', false);
      else if (state.kind !== 'off') this.off(`it ended (${signal ?? `exit code ${code}`})`, true);
    });
    if (child.pid !== undefined) writePid(socket, child.pid);
    const since = Date.now();
    const wait = async (): Promise<void> => {
      while (waiting && Date.now() - since < START_WITHIN_MS) {
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

/** The calls answered by REST, as the CLI prints them: `ps --all --format=json` with filters, and `image exists`. */
function restAnswer(socket: string, args: readonly string[]): ((deadlineMs: number) => Promise<string>) | undefined {
  if (args[0] === 'ps' && args[1] === '--all' && args[2] === '--format=json' && args.slice(3).every((a) => a.startsWith('--filter='))) {
    const filters: Record<string, string[]> = {};
    for (const arg of args.slice(3)) {
      const [key, ...value] = arg.slice('--filter='.length).split('=');
      filters[key] = [...(filters[key] ?? []), value.join('=')];
    }
    const query = `all=true&filters=${encodeURIComponent(JSON.stringify(filters))}`;
    return (deadlineMs) => get(socket, `/v4.0.0/libpod/containers/json?${query}`, deadlineMs).then(({ status, body }) => okOrLost(status, body));
  }
  if (args.join(' ') === 'stats --no-stream --format {{json .ContainerStats}}') {
    // The same figures, a JSON line each, as the CLI prints them.
    return (deadlineMs) =>
      get(socket, '/v4.0.0/libpod/containers/stats?stream=false', deadlineMs).then(({ status, body }) => {
        const stats = (JSON.parse(okOrLost(status, body)) as { Stats?: unknown[] | null }).Stats ?? [];
        return stats.map((s) => JSON.stringify(s)).join('\n');
      });
  }
  // A container removed, stopped or started: with its own stop timeout, as the CLI does; "no such container" in Podman's words.
  const container = args.at(-1) ?? '';
  const one = container !== '' && !container.startsWith('-');
  const action =
    one && args.length === 3 && args[0] === 'rm' && args[1] === '--force'
      ? { method: 'DELETE', path: `/v4.0.0/libpod/containers/${encodeURIComponent(container)}?force=true` }
      : one && args.length === 2 && (args[0] === 'stop' || args[0] === 'start')
        ? { method: 'POST', path: `/v4.0.0/libpod/containers/${encodeURIComponent(container)}/${args[0]}` }
        : undefined;
  if (action) {
    return (deadlineMs) =>
      request(socket, action.method, action.path, deadlineMs).then(({ status, body }) => {
        if (status === 404) throw new CliError(engineMessage(body), 1);
        return status === 304 ? container : okOrLost(status, body) && container;
      });
  }
  if (args[0] === 'image' && args[1] === 'exists' && args.length === 3 && !args[2].startsWith('-')) {
    return (deadlineMs) =>
      get(socket, `/v4.0.0/libpod/images/${encodeURIComponent(args[2])}/exists`, deadlineMs).then(({ status, body }) => {
        if (status === 404) throw new CliError(`${args[2]}: image not known`, 1);
        return okOrLost(status, body);
      });
  }
  return undefined;
}

/** What the engine said in an error answer (`{"message": …}`), else the answer. */
function engineMessage(body: string): string {
  try {
    const message = (JSON.parse(body) as { message?: unknown }).message;
    if (typeof message === 'string') return message;
  } catch {
    // Not JSON: said as it came.
  }
  return body.slice(0, 500);
}

/** An answer other than success is no answer: the call is made again by the CLI, which says what is wrong. */
function okOrLost(status: number, body: string): string {
  if (status >= 200 && status < 300) return body;
  throw new RouteLost(`the service answered ${status}: ${body.slice(0, 200)}`);
}

/** Whether the socket answers Podman's ping as Podman does (its API version in the answer), within `withinMs`. */
async function ping(socket: string, withinMs: number): Promise<boolean> {
  try {
    const { status, headers } = await get(socket, '/_ping', withinMs);
    return status === 200 && typeof headers['libpod-api-version'] === 'string';
  } catch {
    return false;
  }
}

const get = (socket: string, url: string, deadlineMs: number) => request(socket, 'GET', url, deadlineMs);

/** A request without a body on the socket, within `deadlineMs`; a failure of the way is a RouteLost. */
function request(
  socket: string,
  method: string,
  url: string,
  deadlineMs: number,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath: socket, method, path: url, agent: false, headers: { host: 'd' } }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) request.destroy(new Error(`an answer of more than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on('end', () => {
        clearTimeout(timer);
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString() });
      });
      response.on('error', () => undefined);
    });
    const timer = setTimeout(() => request.destroy(new Error(`no answer within ${deadlineMs / 1000} s`)), deadlineMs);
    request.on('error', (err) => {
      clearTimeout(timer);
      reject(new RouteLost(err.message));
    });
    request.end();
  });
}

function isSocket(file: string): boolean {
  try {
    return lstatSync(file).isSocket();
  } catch {
    return false;
  }
}

/** The pid of the service the agent started earlier on `socket`, when that process still is one. */
function servicePid(socket: string): number | undefined {
  try {
    const pid = Number(readFileSync(`${socket}.pid`, 'utf8'));
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return command.includes('service') && command.includes(`unix://${socket}`) ? pid : undefined;
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
