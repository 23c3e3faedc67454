// FIFOs without blocking: opened O_RDWR | O_NONBLOCK (never blocks, never sees end of file, needs no
// peer) and driven by net.Socket on epoll, so no libuv threadpool thread waits on a pipe.
import { closeSync, constants, fstatSync, lstatSync, openSync, rmSync } from 'node:fs';
import net from 'node:net';
import { Observable, of } from 'rxjs';

/**
 * swdd~agent-create-control-interface-pipes-per-workload~2: a FIFO that is there (lstat: the path itself,
 * never what a link points to) is reused, so a client that kept its descriptors across an agent restart
 * is heard again; anything else a workload put there (a symlink, a file, a folder) is removed, never
 * followed, and the FIFO made afresh.
 */
export async function ensureFifo(path: string): Promise<void> {
  if (isFifo(path)) return;
  rmSync(path, { force: true, recursive: true });
  const { execa } = await import('execa');
  await execa('mkfifo', ['-m', '0600', path]);
}

function isFifo(path: string): boolean {
  try {
    return lstatSync(path).isFIFO();
  } catch {
    return false;
  }
}

/**
 * Opens the FIFO without blocking and without following a symlink, and checks that what was opened is a
 * FIFO: a workload that swaps its pipes cannot point the agent at anything else.
 */
export function openFifo(path: string): number {
  const fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK | constants.O_NOFOLLOW);
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

/** Writes into a FIFO; what the reader has not taken is kept up to `maxBacklogBytes`, beyond that writes are refused. */
export class FifoWriter {
  private readonly socket: net.Socket;

  constructor(path: string, private readonly maxBacklogBytes: number) {
    // Not readable: this end must never read back what it wrote for the workload.
    this.socket = new net.Socket({ fd: openFifo(path), readable: false, writable: true });
    this.socket.on('error', () => undefined);
  }

  /** Writes the bytes in one piece, or nothing (false) when the backlog is full. */
  write(bytes: Uint8Array): boolean {
    if (this.socket.destroyed || this.socket.writableLength + bytes.length > this.maxBacklogBytes) return false;
    this.socket.write(bytes);
    return true;
  }

  get backlog(): number {
    return this.socket.writableLength;
  }

  close(): void {
    this.socket.destroy();
  }
}
