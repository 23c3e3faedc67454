// FIFOs without blocking: opened O_NONBLOCK and driven by net.Socket on epoll, so no libuv threadpool
// thread waits on a pipe. A pipe the agent reads is opened O_RDWR (it never sees end of file and needs
// no peer); a pipe it writes, O_WRONLY (so it sees when nobody reads).
import { execFile } from 'node:child_process';
import { closeSync, constants, fstatSync, lstatSync, openSync } from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';
import { Observable, of } from 'rxjs';
import { removeTree } from './run-folder.js';

const mkfifo = (...args: string[]) => promisify(execFile)('mkfifo', args, { timeout: 10_000 });

/**
 * swdd~agent-create-control-interface-pipes-per-workload~2: a FIFO that is there (lstat: the path itself,
 * never what a link points to) is reused, so a client that kept its descriptors across an agent restart
 * is heard again; anything else a workload put there (a symlink, a file, a folder) is removed, never
 * followed, and the FIFO made afresh.
 */
export async function ensureFifo(path: string): Promise<void> {
  if (isFifo(path)) return;
  removeTree(path);
  await mkfifo('-m', '0600', path);
}

function isFifo(path: string): boolean {
  try {
    return lstatSync(path).isFIFO();
  } catch {
    return false;
  }
}

/**
 * Opens the FIFO without blocking and without following a symlink, and only a FIFO (looked at before,
 * so no device is ever opened, and checked after): a workload that swaps its pipes cannot point the
 * agent at anything else.
 */
export function openFifo(path: string, access: number = constants.O_RDWR): number {
  if (!isFifo(path)) throw new Error(`'${path}' is not a FIFO`);
  const fd = openSync(path, access | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  if (!fstatSync(fd).isFIFO()) {
    closeSync(fd);
    throw new Error(`'${path}' is not a FIFO`);
  }
  return fd;
}

/** The chunks written into the FIFO opened as `fd` (openFifo), for as long as it is subscribed; closes it then. */
export function fifoChunks(fd: number, paused$: Observable<boolean> = of(false)): Observable<Uint8Array> {
  return new Observable<Uint8Array>((subscriber) => {
    const socket = new net.Socket({ fd, readable: true, writable: false });
    socket.on('data', (chunk: Buffer) => subscriber.next(chunk));
    socket.on('error', (err) => subscriber.error(err));
    // Not reading lets the pipe fill: the workload's writes block or fail with EAGAIN until reading goes on.
    const pausing = paused$.subscribe((paused) => (paused ? socket.pause() : socket.resume()));
    return () => {
      pausing.unsubscribe();
      socket.destroy();
    };
  });
}

/** How long a write may wait for a workload that does not read before it counts as gone (swdd~agent-handles-control-interface-full-output-pipe-buffer~1). */
export const WRITE_TIMEOUT_MS = 500;
/** How often, and how far apart, a pipe nobody reads from is tried again (swdd~agent-handles-control-interface-output-pipe-closed~1). */
export const REOPEN_ATTEMPTS = 5;
export const REOPEN_INTERVAL_MS = 100;

/**
 * Writes frames into a FIFO for a reader that may come and go, one frame at a time and never blocking.
 * The pipe is opened for writing only (so a missing reader shows: ENXIO on open, EPIPE on write); a
 * missing reader is waited for REOPEN_ATTEMPTS × REOPEN_INTERVAL_MS, a reader that does not take a frame
 * for WRITE_TIMEOUT_MS is gone. A gone reader takes every waiting frame with it (`onGone`), so a
 * workload that stopped reading costs one timeout, not one per frame. What waits is bounded by
 * `maxQueuedBytes` (or one frame of any size): a frame beyond it is undelivered at once.
 */
export class FifoWriter<T extends { readonly bytes: Uint8Array }> {
  private socket?: net.Socket;
  private readonly queue: T[] = [];
  private queuedBytes = 0;
  private writing = false;
  private timer?: NodeJS.Timeout;
  /** Tells the callbacks of an abandoned attempt from those of the current one. */
  private attempt = 0;
  private closed = false;

  constructor(
    private readonly path: string,
    private readonly maxQueuedBytes: number,
    private readonly onGone: (frames: readonly T[], reason: string) => void,
  ) {}

  write(frame: T): void {
    if (this.closed) return;
    if (this.queue.length > 0 && this.queuedBytes + frame.bytes.length > this.maxQueuedBytes) {
      this.onGone([frame], `more than ${this.maxQueuedBytes} bytes wait for the reader`);
      return;
    }
    this.queue.push(frame);
    this.queuedBytes += frame.bytes.length;
    if (!this.writing) this.writeHead(0);
  }

  close(): void {
    this.closed = true;
    this.abandon();
    this.queue.length = 0;
    this.queuedBytes = 0;
  }

  private writeHead(retries: number): void {
    const frame = this.queue[0];
    if (frame === undefined || this.closed) {
      this.writing = false;
      return;
    }
    this.writing = true;
    const attempt = ++this.attempt;
    let socket: net.Socket;
    try {
      socket = this.socket ??= this.openSocket();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENXIO') this.retry(retries, 'nobody reads the pipe');
      else this.gone(`the pipe cannot be opened: ${(err as Error).message}`);
      return;
    }
    this.timer = setTimeout(() => {
      this.abandon();
      this.gone(`the reader took nothing for ${WRITE_TIMEOUT_MS} ms`);
    }, WRITE_TIMEOUT_MS).unref();
    socket.write(frame.bytes, (err) => {
      if (attempt !== this.attempt) return;
      if (err) {
        this.abandon();
        return (err as NodeJS.ErrnoException).code === 'EPIPE'
          ? this.retry(retries, 'the reader closed the pipe')
          : this.gone(`writing failed: ${err.message}`);
      }
      clearTimeout(this.timer);
      this.queuedBytes -= this.queue.shift()!.bytes.length;
      this.writeHead(0);
    });
  }

  private retry(retries: number, reason: string): void {
    if (retries >= REOPEN_ATTEMPTS) {
      this.gone(`${reason} (tried ${REOPEN_ATTEMPTS} more times)`);
      return;
    }
    this.timer = setTimeout(() => this.writeHead(retries + 1), REOPEN_INTERVAL_MS).unref();
  }

  private gone(reason: string): void {
    const frames = this.queue.splice(0);
    this.queuedBytes = 0;
    this.writing = false;
    this.onGone(frames, reason);
  }

  /** Ends the current attempt: its timer, and the socket (with what it still holds). */
  private abandon(): void {
    this.attempt += 1;
    clearTimeout(this.timer);
    this.socket?.destroy();
    this.socket = undefined;
  }

  private openSocket(): net.Socket {
    const socket = new net.Socket({ fd: openFifo(this.path, constants.O_WRONLY), readable: false, writable: true });
    socket.on('error', () => undefined);
    return socket;
  }
}
