// HTTP/1.1 requests without a body on a Unix socket, with connections kept for a burst. Node's http client
// costs ~2.5 × the CPU of this per request (ClientRequest, IncomingMessage, its streams and its agent); a
// service on a socket of the agent's run folder needs none of that: a request line, a head read, a body framed by
// its length, by chunks or by the close. Every part of an answer is bounded, and a request settles on every way an
// answer can end (whole, cut, too large, not at all within its deadline, which covers the wait for a connection).
import net from 'node:net';

/** The way to the service failed (no connection, no answer in time, an answer that is not HTTP). */
export class RouteLost extends Error {}

/** An answer the service began and did not finish: the way is broken, whatever else the service still answers. */
export class AnswerCut extends RouteLost {}

export interface Answer {
  readonly status: number;
  /** The head's fields by lower-case name (the last of a name given twice). */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: string;
}

/** The most a head may hold, and a chunk's size line or a trailer (all of them with the body: its most and a head's). */
const MAX_HEAD_BYTES = 64 * 1024;
const MAX_LINE_BYTES = 1024;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

type Framing = { readonly by: 'length'; left: number } | { readonly by: 'chunks' } | { readonly by: 'close' };

/**
 * One answer read from the bytes as they come: its head, then its body as its framing says. `feed` says whether
 * the answer is whole; it throws a RouteLost for an answer that is not HTTP or larger than allowed.
 */
class AnswerReader {
  status = 0;
  headers = new Map<string, string>();
  /** Bytes after the answer (none from a service that answers one request at a time): the connection is not kept. */
  extra = false;
  private phase: 'head' | 'body' | 'size' | 'chunk' | 'chunkEnd' | 'trailers' | 'done' = 'head';
  private pending: Buffer = Buffer.alloc(0);
  private framing: Framing = { by: 'close' };
  private chunkLeft = 0;
  private readonly parts: Buffer[] = [];
  private size = 0;
  /** Every byte of the answer so far, head and framing included. */
  private received = 0;
  /** The head's bytes while it is not whole, and the last bytes of them (its end may come split). */
  private headParts: Buffer[] = [];
  private headBytes = 0;
  private headTail: Buffer = Buffer.alloc(0);

  constructor(
    private readonly method: string,
    private readonly maxBodyBytes: number,
  ) {}

  get headRead(): boolean {
    return this.phase !== 'head';
  }

  /** Whether a close now ends the answer whole (a body framed by the close). */
  get endsAtClose(): boolean {
    return this.phase === 'body' && this.framing.by === 'close';
  }

  get body(): string {
    return Buffer.concat(this.parts).toString();
  }

  feed(bytes: Buffer): boolean {
    this.received += bytes.length;
    if (this.received > MAX_HEAD_BYTES + this.maxBodyBytes) throw new RouteLost(`an answer of more than ${this.maxBodyBytes} bytes`);
    if (this.phase === 'head') {
      if (!this.headIn(bytes)) return false;
    } else this.pending = this.pending.length === 0 ? bytes : Buffer.concat([this.pending, bytes]);
    while (this.phase !== 'done') {
      if (!this.step()) return false;
    }
    this.extra = this.pending.length > 0;
    return true;
  }

  /**
   * Whether the head is whole with `bytes`: then it is read, and what follows it is pending. Each byte is looked at
   * once and the head copied once, however it comes (a byte at a time, too).
   */
  private headIn(bytes: Buffer): boolean {
    const probe = this.headTail.length === 0 ? bytes : Buffer.concat([this.headTail, bytes]);
    const at = probe.indexOf(HEAD_END);
    const end = at < 0 ? -1 : this.headBytes - this.headTail.length + at;
    this.headParts.push(bytes);
    this.headBytes += bytes.length;
    if (end > MAX_HEAD_BYTES || (end < 0 && this.headBytes > MAX_HEAD_BYTES)) throw new RouteLost(`the service's head is longer than ${MAX_HEAD_BYTES} bytes`);
    if (end < 0) {
      this.headTail = Buffer.from(probe.subarray(Math.max(0, probe.length - (HEAD_END.length - 1))));
      return false;
    }
    const whole = this.headParts.length === 1 ? bytes : Buffer.concat(this.headParts);
    this.headParts = [];
    this.readHead(whole.toString('latin1', 0, end));
    this.pending = whole.subarray(end + HEAD_END.length);
    return true;
  }

  /** One step of the answer after its head; false when it needs more bytes. */
  private step(): boolean {
    switch (this.phase) {
      case 'body': {
        if (this.framing.by === 'length') {
          this.framing.left -= this.take(this.framing.left);
          if (this.framing.left === 0) this.phase = 'done';
        } else this.take(this.pending.length);
        return this.phase === 'done';
      }
      case 'size': {
        const line = this.line('chunk size');
        if (line === undefined) return false;
        const hex = /^[0-9a-fA-F]{1,8}(?=[ \t;]|$)/.exec(line);
        if (!hex) throw new RouteLost(`the service's chunk size is not one: ${JSON.stringify(line.slice(0, 40))}`);
        this.chunkLeft = Number.parseInt(hex[0], 16);
        this.phase = this.chunkLeft === 0 ? 'trailers' : 'chunk';
        return true;
      }
      case 'chunk':
        this.chunkLeft -= this.take(this.chunkLeft);
        if (this.chunkLeft > 0) return false;
        this.phase = 'chunkEnd';
        return true;
      case 'chunkEnd':
        if (this.pending.length < CRLF.length) return false;
        if (!this.pending.subarray(0, CRLF.length).equals(CRLF)) throw new RouteLost("the service's chunk does not end where its size says");
        this.pending = this.pending.subarray(CRLF.length);
        this.phase = 'size';
        return true;
      case 'trailers': {
        const line = this.line('trailer');
        if (line === undefined) return false;
        if (line === '') this.phase = 'done';
        return true;
      }
      default:
        return true;
    }
  }

  private readHead(head: string): void {
    const [first, ...fields] = head.split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(first);
    if (!status) throw new RouteLost(`the service's answer is not HTTP/1.1: ${JSON.stringify(first.slice(0, 40))}`);
    this.status = Number(status[1]);
    for (const field of fields) {
      const colon = field.indexOf(':');
      if (colon > 0) this.headers.set(field.slice(0, colon).trim().toLowerCase(), field.slice(colon + 1).trim());
    }
    const length = this.headers.get('content-length');
    if (this.method === 'HEAD' || this.status === 204 || this.status === 304 || (this.status >= 100 && this.status < 200))
      this.framing = { by: 'length', left: 0 };
    else if (/\bchunked\b/i.test(this.headers.get('transfer-encoding') ?? '')) this.framing = { by: 'chunks' };
    else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) throw new RouteLost(`the service's answer has a length that is not one: ${JSON.stringify(length.slice(0, 40))}`);
      this.framing = { by: 'length', left: Number(length) };
      this.grow(0);
    }
    this.phase = this.framing.by === 'chunks' ? 'size' : 'body';
    if (this.framing.by === 'length' && this.framing.left === 0) this.phase = 'done';
  }

  /** Moves up to `most` pending bytes into the body; how many it moved. */
  private take(most: number): number {
    const n = Math.min(most, this.pending.length);
    if (n === 0) return 0;
    this.grow(n);
    this.parts.push(this.pending.subarray(0, n));
    this.pending = this.pending.subarray(n);
    return n;
  }

  private grow(n: number): void {
    this.size += n;
    const promised = this.framing.by === 'length' ? this.framing.left - n : 0;
    if (this.size + promised > this.maxBodyBytes) throw new RouteLost(`an answer of more than ${this.maxBodyBytes} bytes`);
  }

  /** A line of the pending bytes, taken off them; undefined while it has not come whole. */
  private line(what: string): string | undefined {
    const end = this.pending.indexOf(CRLF);
    if (end > MAX_LINE_BYTES || (end < 0 && this.pending.length > MAX_LINE_BYTES))
      throw new RouteLost(`the service's ${what} is longer than ${MAX_LINE_BYTES} bytes`);
    if (end < 0) return undefined;
    const line = this.pending.toString('latin1', 0, end);
    this.pending = this.pending.subarray(end + CRLF.length);
    return line;
  }
}

/** Requests on one socket, on at most `maxConnections` connections at once; a connection idle for `idleMs` is closed. */
export class UnixHttp {
  private readonly idle: net.Socket[] = [];
  private open = 0;
  private readonly waiting: Array<(connection: net.Socket | undefined) => void> = [];
  private disposed = false;

  constructor(
    readonly socket: string,
    private readonly options: { readonly maxConnections: number; readonly idleMs: number; readonly maxAnswerBytes: number },
  ) {}

  /** Closes the connections kept open and refuses requests from now on; one under way ends as it would, its connection closed after it. */
  dispose(): void {
    this.disposed = true;
    for (const connection of this.idle.splice(0)) connection.destroy();
    for (const waiter of this.waiting.splice(0)) waiter(undefined);
  }

  /**
   * `method path` within `deadlineMs`, on a kept connection where one is idle; a kept connection the service
   * closed as it was taken (nothing of the answer came) is replaced once by a new one.
   */
  request(method: string, path: string, deadlineMs: number): Promise<Answer> {
    const deadline = performance.now() + deadlineMs;
    const timeLeft = () => Math.max(0, deadline - performance.now());
    return new Promise<net.Socket>((resolve, reject) => {
      if (this.disposed) reject(new RouteLost('the connections were closed'));
      else if (this.idle.length > 0) resolve(this.taken(this.idle.pop() as net.Socket));
      else if (this.open < this.options.maxConnections) {
        this.open++;
        resolve(this.counted(net.connect(this.socket)));
      } else {
        const timer = setTimeout(() => {
          this.waiting.splice(this.waiting.indexOf(waiter), 1);
          reject(new RouteLost(`no answer within ${deadlineMs / 1000} s`));
        }, deadlineMs);
        const waiter = (connection: net.Socket | undefined) => {
          clearTimeout(timer);
          if (connection) resolve(connection);
          else reject(new RouteLost('the connections were closed'));
        };
        this.waiting.push(waiter);
      }
    }).then((connection) =>
      exchange(connection, method, path, timeLeft(), deadlineMs, this.options.maxAnswerBytes).then(
        ({ answer, keep }) => {
          this.release(connection, keep);
          return answer;
        },
        (err: unknown) => {
          // Nothing of this answer came on a connection that carried answers before: the service closed it as it was taken.
          const reused = connection.bytesRead > 0;
          this.release(connection, false);
          if (err instanceof Untouched && reused) return oneShot(this.socket, method, path, timeLeft(), deadlineMs, this.options.maxAnswerBytes);
          throw err instanceof Untouched ? new RouteLost(err.message) : err;
        },
      ),
    );
  }

  /** A connection of this pool, counted until it closes; an idle one closes on its idle timeout and on any error. */
  private counted(connection: net.Socket): net.Socket {
    connection.on('error', () => undefined);
    connection.on('timeout', () => connection.destroy());
    connection.once('close', () => {
      this.open--;
      const at = this.idle.indexOf(connection);
      if (at >= 0) this.idle.splice(at, 1);
      this.handOn();
    });
    return connection;
  }

  private taken(connection: net.Socket): net.Socket {
    connection.setTimeout(0);
    connection.ref();
    return connection;
  }

  /** A connection back after its request: kept for the next one, or closed. */
  private release(connection: net.Socket, keep: boolean): void {
    if (!keep || this.disposed || connection.destroyed) {
      connection.destroy();
      return;
    }
    const waiter = this.waiting.shift();
    if (waiter) waiter(this.taken(connection));
    else {
      connection.unref();
      connection.setTimeout(this.options.idleMs);
      this.idle.push(connection);
    }
  }

  /** A waiting request gets a new connection for one that closed. */
  private handOn(): void {
    if (this.disposed || this.waiting.length === 0 || this.open >= this.options.maxConnections) return;
    this.open++;
    (this.waiting.shift() as (c: net.Socket) => void)(this.counted(net.connect(this.socket)));
  }
}

/** A request on a connection of its own, closed after its answer. */
export function oneShot(
  socket: string,
  method: string,
  path: string,
  withinMs: number,
  deadlineMs = withinMs,
  maxAnswerBytes = MAX_HEAD_BYTES,
): Promise<Answer> {
  const connection = net.connect(socket).on('error', () => undefined);
  return exchange(connection, method, path, withinMs, deadlineMs, maxAnswerBytes).then(
    ({ answer }) => {
      connection.destroy();
      return answer;
    },
    (err: unknown) => {
      connection.destroy();
      throw err instanceof Untouched ? new RouteLost(err.message) : err;
    },
  );
}

/** The connection ended before any of the answer came: a kept one the service closed may be replaced. */
class Untouched extends RouteLost {}

/** One request and its answer on `connection`; whether the connection may carry another. */
function exchange(
  connection: net.Socket,
  method: string,
  path: string,
  withinMs: number,
  deadlineMs: number,
  maxAnswerBytes: number,
): Promise<{ answer: Answer; keep: boolean }> {
  return new Promise((resolve, reject) => {
    const reader = new AnswerReader(method, maxAnswerBytes);
    let anyByte = false;
    const done = (outcome: () => void) => {
      clearTimeout(timer);
      connection.off('data', onData);
      connection.off('error', onError);
      connection.off('close', onClose);
      outcome();
    };
    const whole = (keep: boolean) => done(() => resolve({ answer: { status: reader.status, headers: reader.headers, body: reader.body }, keep }));
    const fail = (why: string) => done(() => reject(reader.headRead ? new AnswerCut(why) : anyByte ? new RouteLost(why) : new Untouched(why)));
    const onData = (bytes: Buffer) => {
      anyByte = true;
      try {
        if (reader.feed(bytes)) whole(!reader.extra && reader.headers.get('connection')?.toLowerCase() !== 'close');
      } catch (err) {
        done(() => reject(err));
      }
    };
    const onError = (err: Error) => fail(reader.headRead ? `the answer was cut: ${err.message}` : err.message);
    const onClose = () => {
      if (reader.endsAtClose) whole(false);
      else fail(reader.headRead ? 'the connection closed before the answer was whole' : 'the connection closed before an answer was whole');
    };
    const timer = setTimeout(() => done(() => reject(new RouteLost(`no answer within ${deadlineMs / 1000} s`))), withinMs);
    connection.on('data', onData);
    connection.on('error', onError);
    connection.on('close', onClose);
    connection.write(`${method} ${path} HTTP/1.1\r\nHost: d\r\n\r\n`);
  });
}
