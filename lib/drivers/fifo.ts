// FIFOs without blocking: opened O_RDWR | O_NONBLOCK (never blocks, never sees end of file, needs no
// peer) and driven by net.Socket on epoll, so no libuv threadpool thread waits on a pipe.
import { constants, lstatSync, openSync } from 'node:fs';
import net from 'node:net';
import { Observable } from 'rxjs';

/** Creates the FIFO unless it exists. */
export async function makeFifo(path: string): Promise<void> {
  try {
    if (lstatSync(path).isFIFO()) return;
    throw new Error(`'${path}' exists and is not a FIFO`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const { execa } = await import('execa');
  await execa('mkfifo', ['-m', '0600', path]);
}

const openNonBlocking = (path: string) => openSync(path, constants.O_RDWR | constants.O_NONBLOCK);

/** The chunks written into the FIFO, for as long as it is subscribed. */
export function fifoChunks(path: string): Observable<Uint8Array> {
  return new Observable<Uint8Array>((subscriber) => {
    const socket = new net.Socket({ fd: openNonBlocking(path), readable: true, writable: false });
    socket.on('data', (chunk: Buffer) => subscriber.next(chunk));
    socket.on('error', (err) => subscriber.error(err));
    return () => socket.destroy();
  });
}

/** Writes into a FIFO; what the reader has not taken is kept up to `maxBacklogBytes`, beyond that writes are refused. */
export class FifoWriter {
  private readonly socket: net.Socket;

  constructor(path: string, private readonly maxBacklogBytes: number) {
    // Not readable: this end must never read back what it wrote for the workload.
    this.socket = new net.Socket({ fd: openNonBlocking(path), readable: false, writable: true });
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
