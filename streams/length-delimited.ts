// swdd~agent-uses-length-delimited-protobuf-for-pipes~1: a protobuf varint length, then that many bytes.
import { type OperatorFunction, defer, mergeMap } from 'rxjs';
import { type Frame, MAX_FRAME_BYTES } from '../lib/ports.js';

/** A length prefix above this is taken for garbage rather than a frame to pass over (its bytes would hide what follows). */
export const MAX_SKIPPED_FRAME_BYTES = 64 * 1024 * 1024;

/** The length prefix at the start of `buf`: its value and size, 'short' when more bytes are needed, 'bad' when invalid. */
function readVarint(buf: Uint8Array, at = 0): { value: number; size: number } | 'short' | 'bad' {
  let value = 0;
  const end = Math.min(buf.length, at + 5);
  for (let i = at; i < end; i++) {
    value += (buf[i] & 0x7f) * 2 ** (7 * (i - at));
    if ((buf[i] & 0x80) === 0) return { value, size: i - at + 1 };
  }
  return end - at >= 5 ? 'bad' : 'short';
}

export function encodeFrame(message: Uint8Array): Uint8Array {
  const prefix: number[] = [];
  let n = message.length;
  do {
    prefix.push((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    n = Math.floor(n / 0x80);
  } while (n > 0);
  const out = new Uint8Array(prefix.length + message.length);
  out.set(prefix);
  out.set(message, prefix.length);
  return out;
}

export interface FrameRules {
  readonly maxFrameBytes?: number;
  /** Whether a complete frame is a message at all; one that is not is reported as garbage. */
  readonly isValid?: (frame: Uint8Array) => boolean;
  /** A frame to resynchronise on after garbage (e.g. a Hello): reading skips ahead to the next one. */
  readonly isResyncPoint?: (frame: Uint8Array) => boolean;
  /** The byte every resync frame starts with, if there is one: other candidates are passed over at once. */
  readonly resyncFirstByte?: number;
}

/**
 * The largest frame that can be a resync point: a Hello is a few dozen bytes. While hunting, longer
 * candidates are not even looked at, so the bytes kept and the work per byte stay bounded.
 */
export const MAX_RESYNC_FRAME_BYTES = 256;

/** Counts the work of the decoder (bytes it looked at), for specs and benchmarks that check it stays linear. */
export interface DecodeCounter {
  steps: number;
}

/**
 * Looks for the next resync point in `buf` without looking at any offset twice: each offset's length
 * prefix is read once, and a candidate that needs more bytes waits in `pending` until they come.
 */
class Hunt {
  private buf: Uint8Array = new Uint8Array(0);
  /** The next offset whose length prefix has not been read. */
  private next = 0;
  /** Candidates [start, end) that need more bytes; few, all in the last MAX_RESYNC_FRAME_BYTES + 5 bytes. */
  private pending: Array<{ readonly start: number; readonly body: number; readonly end: number }> = [];

  constructor(
    private readonly isResyncPoint: (frame: Uint8Array) => boolean,
    private readonly firstByte: number | undefined,
    private readonly counter?: DecodeCounter,
  ) {}

  /** Takes more bytes; returns the bytes from the resync point on, when one is found. */
  feed(chunk: Uint8Array): Uint8Array | undefined {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const found = this.search();
    if (found !== undefined) {
      const rest = this.buf.subarray(found);
      this.buf = new Uint8Array(0);
      [this.next, this.pending] = [0, []];
      return rest;
    }
    // Nothing before the first pending candidate (or the next unread prefix) can start a resync point.
    const keep = Math.min(this.next, this.pending[0]?.start ?? this.next);
    this.buf = this.buf.subarray(keep);
    this.next -= keep;
    this.pending = this.pending.map((c) => ({ start: c.start - keep, body: c.body - keep, end: c.end - keep }));
    return undefined;
  }

  private search(): number | undefined {
    const { buf } = this;
    const count = (n: number) => {
      if (this.counter) this.counter.steps += n;
    };
    const examine = (body: number, end: number) => {
      if (this.firstByte !== undefined && buf[body] !== this.firstByte) return false;
      count(end - body);
      return this.isResyncPoint(buf.subarray(body, end));
    };
    for (const c of this.pending) {
      if (c.end <= buf.length && examine(c.body, c.end)) return c.start;
    }
    this.pending = this.pending.filter((c) => c.end > buf.length);
    for (; this.next < buf.length; this.next++) {
      count(1);
      const prefix = readVarint(buf, this.next);
      if (prefix === 'short') {
        if (this.next + 5 <= buf.length) continue;
        break;
      }
      if (prefix === 'bad' || prefix.value > MAX_RESYNC_FRAME_BYTES || prefix.value === 0) continue;
      const body = this.next + prefix.size;
      const end = body + prefix.value;
      if (end > buf.length) {
        this.pending.push({ start: this.next, body, end });
        continue;
      }
      if (examine(body, end)) return this.next;
    }
    return undefined;
  }
}

/** Bytes waiting to be read, appended in amortised constant time per byte (the buffer doubles when full). */
class ByteQueue {
  private data = new Uint8Array(1024);
  private start = 0;
  private end = 0;

  get length(): number {
    return this.end - this.start;
  }

  view(): Uint8Array {
    return this.data.subarray(this.start, this.end);
  }

  push(chunk: Uint8Array): void {
    if (this.end + chunk.length > this.data.length) {
      const length = this.length;
      const target = length + chunk.length > this.data.length ? new Uint8Array(Math.max(2 * this.data.length, length + chunk.length)) : this.data;
      target.set(this.data.subarray(this.start, this.end), 0);
      [this.data, this.start, this.end] = [target, 0, length];
    }
    this.data.set(chunk, this.end);
    this.end += chunk.length;
  }

  drop(n: number): void {
    this.start += n;
    if (this.start === this.end) [this.start, this.end] = [0, 0];
  }

  clear(): void {
    [this.start, this.end] = [0, 0];
  }
}

/**
 * Reassembles frames from chunks that may split or join them. After garbage (an invalid frame or a length
 * over the limit) it skips to the next resync point, and a chunk that starts with a complete resync point
 * ends a partial frame that waits in vain. The work is linear in the bytes, whatever they are: waiting
 * bytes are appended once, and hunting looks at each offset once.
 */
export function decodeFrames(rules: FrameRules = {}, counter?: DecodeCounter): OperatorFunction<Uint8Array, Frame> {
  return (chunks$) =>
    defer(() => {
      const reader = new FrameReader(rules, counter);
      return chunks$.pipe(mergeMap((chunk) => reader.read(chunk)));
    });
}

/** One stream's reassembly: the bytes that wait for the rest of their frame, a hunt under way, an oversized frame passed over. */
class FrameReader {
  private readonly queue = new ByteQueue();
  private hunt: Hunt | undefined;
  /** Bytes of an oversized frame still to pass over. */
  private skip = 0;
  private readonly max: number;
  private readonly isValid: (bytes: Uint8Array) => boolean;

  constructor(
    private readonly rules: FrameRules,
    private readonly counter?: DecodeCounter,
  ) {
    this.max = rules.maxFrameBytes ?? MAX_FRAME_BYTES;
    this.isValid = rules.isValid ?? (() => true);
  }

  /** The frames (and garbage) a chunk completes. */
  read(input: Uint8Array): Frame[] {
    const frames: Frame[] = [];
    if (this.counter) this.counter.steps += input.length;
    const chunk = this.passOver(input);
    if (chunk.length === 0) return frames;
    if (this.queue.length > 0 && !this.hunt && this.startsWithResyncPoint(chunk)) {
      frames.push({ kind: 'garbage', reason: `an unfinished frame of ${this.queue.length} bytes` });
      this.queue.clear();
    }
    /** Bytes for the queue: the chunk, or while hunting what follows the resync point once found. */
    let incoming: Uint8Array | undefined = this.hunt ? this.hunt.feed(chunk) : chunk;
    while (incoming !== undefined) {
      this.hunt = undefined;
      this.queue.push(incoming);
      incoming = this.drain(frames);
    }
    return frames;
  }

  /** The chunk past what is left of an oversized frame, which ends (as a partial frame waiting in vain) at a chunk that starts with a resync point. */
  private passOver(input: Uint8Array): Uint8Array {
    if (this.skip > 0 && this.startsWithResyncPoint(input)) this.skip = 0;
    const skipped = Math.min(this.skip, input.length);
    this.skip -= skipped;
    return input.subarray(skipped);
  }

  /**
   * Moves the queue's whole frames to `frames`. At garbage it starts a hunt for the next resync point from the
   * byte after the one that failed, and returns what follows that point once found (for the queue).
   */
  private drain(frames: Frame[]): Uint8Array | undefined {
    for (;;) {
      const buf = this.queue.view();
      const prefix = readVarint(buf);
      if (prefix === 'short') return undefined;
      if (prefix !== 'bad' && prefix.value > this.max && prefix.value <= MAX_SKIPPED_FRAME_BYTES) {
        frames.push({ kind: 'oversized', size: prefix.value });
        const held = Math.min(buf.length, prefix.size + prefix.value);
        this.skip = prefix.size + prefix.value - held;
        this.queue.drop(held);
        continue;
      }
      let garbage: string;
      if (prefix === 'bad' || prefix.value > this.max) {
        garbage = prefix === 'bad' ? 'an invalid length prefix' : `a length prefix of ${prefix.value} bytes (over ${MAX_SKIPPED_FRAME_BYTES})`;
      } else {
        const needed = prefix.size + prefix.value;
        if (buf.length < needed) return undefined;
        const bytes = buf.slice(prefix.size, needed);
        if (this.isValid(bytes)) {
          frames.push({ kind: 'frame', bytes });
          this.queue.drop(needed);
          continue;
        }
        garbage = 'not a valid message';
      }
      frames.push({ kind: 'garbage', reason: garbage });
      const rest = buf.slice(1);
      this.queue.clear();
      this.hunt = new Hunt(this.rules.isResyncPoint ?? (() => false), this.rules.resyncFirstByte, this.counter);
      return this.hunt.feed(rest);
    }
  }

  /** Whether a chunk starts with a whole resync point (never without the rule). */
  private startsWithResyncPoint(chunk: Uint8Array): boolean {
    const isResyncPoint = this.rules.isResyncPoint;
    if (!isResyncPoint) return false;
    const prefix = readVarint(chunk);
    if (typeof prefix === 'string' || prefix.value > MAX_RESYNC_FRAME_BYTES || prefix.size + prefix.value > chunk.length) return false;
    return isResyncPoint(chunk.subarray(prefix.size, prefix.size + prefix.value));
  }
}
