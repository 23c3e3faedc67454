// swdd~agent-uses-length-delimited-protobuf-for-pipes~1: a protobuf varint length, then that many bytes.
import { OperatorFunction, defer, mergeMap } from 'rxjs';

export type Frame =
  | { readonly kind: 'frame'; readonly bytes: Uint8Array }
  /** Bytes that cannot be a frame; what was buffered is dropped and reading starts afresh with the next chunk. */
  | { readonly kind: 'garbage'; readonly reason: string };

/** Far above any real Control Interface message; a larger length prefix is garbage. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

/** The length prefix at the start of `buf`: its value and size, 'short' when more bytes are needed, 'bad' when invalid. */
function readVarint(buf: Uint8Array): { value: number; size: number } | 'short' | 'bad' {
  let value = 0;
  for (let i = 0; i < Math.min(buf.length, 5); i++) {
    value += (buf[i] & 0x7f) * 2 ** (7 * i);
    if ((buf[i] & 0x80) === 0) return { value, size: i + 1 };
  }
  return buf.length >= 5 ? 'bad' : 'short';
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
}

/** How many garbage bytes are kept while looking for a resync point. */
const MAX_HUNT_BYTES = 64 * 1024;

/** The complete frame at `offset`, if there is one there. */
function frameAt(buf: Uint8Array, offset: number, max: number): { start: number; end: number } | undefined {
  const prefix = readVarint(buf.subarray(offset));
  if (typeof prefix === 'string' || prefix.value > max) return undefined;
  const start = offset + prefix.size;
  return start + prefix.value <= buf.length ? { start, end: start + prefix.value } : undefined;
}

/**
 * Reassembles frames from chunks that may split or join them. After garbage (an invalid frame or a length
 * over the limit) it skips to the next resync point, and a chunk that starts with a complete resync point
 * ends a partial frame that waits in vain.
 */
export function decodeFrames(rules: FrameRules = {}): OperatorFunction<Uint8Array, Frame> {
  const max = rules.maxFrameBytes ?? MAX_FRAME_BYTES;
  const isValid = rules.isValid ?? (() => true);
  const resyncAt = (buf: Uint8Array, offset: number) => {
    if (!rules.isResyncPoint) return false;
    const f = frameAt(buf, offset, max);
    return f !== undefined && rules.isResyncPoint(buf.subarray(f.start, f.end));
  };
  return (chunks$) => defer(() => {
    let pending: Uint8Array = new Uint8Array(0);
    let hunting = false;
    return chunks$.pipe(mergeMap((chunk) => {
      const frames: Frame[] = [];
      if (pending.length > 0 && !hunting && resyncAt(chunk, 0)) {
        frames.push({ kind: 'garbage', reason: `an unfinished frame of ${pending.length} bytes` });
        pending = new Uint8Array(0);
      }
      let buf: Uint8Array = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        if (hunting) {
          let at = 0;
          while (at < buf.length && !resyncAt(buf, at)) at++;
          if (at === buf.length) {
            buf = buf.subarray(Math.max(0, buf.length - MAX_HUNT_BYTES));
            break;
          }
          buf = buf.subarray(at);
          hunting = false;
        }
        const prefix = readVarint(buf);
        if (prefix === 'short') break;
        if (prefix === 'bad' || prefix.value > max) {
          frames.push({ kind: 'garbage', reason: prefix === 'bad' ? 'an invalid length prefix' : `a length prefix of ${prefix.value} bytes (over ${max})` });
          buf = buf.subarray(1);
          hunting = true;
          continue;
        }
        if (buf.length < prefix.size + prefix.value) break;
        const bytes = buf.subarray(prefix.size, prefix.size + prefix.value);
        if (isValid(bytes)) {
          frames.push({ kind: 'frame', bytes });
          buf = buf.subarray(prefix.size + prefix.value);
        } else {
          frames.push({ kind: 'garbage', reason: 'not a valid message' });
          buf = buf.subarray(1);
          hunting = true;
        }
      }
      pending = buf;
      return frames;
    }));
  });
}
