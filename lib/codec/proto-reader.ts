// What the decoders written without reflection share (./workload-states.ts, ./workload-updates.ts): a walk
// through one buffer. Each decoder gives the fields protobuf-es gives for its message, as its spec checks; a
// message it does not take whole (a known field in another wire type, bytes that end too soon or are not UTF-8,
// a tag or a length beyond 32 bits) is left to protobuf-es, which says what is wrong.
import { WireType } from '@bufbuild/protobuf/wire';

/** A message the hand reader does not take whole: the usual reader decides what it is. */
export class NotForHand extends Error {}
const expect = (type: number, wanted: WireType) => {
  if (type !== wanted) throw new NotForHand();
};

/**
 * Strings of ASCII (names and ids are) read natively as Latin-1, which is the same for them; others as UTF-8, and
 * bytes that are not UTF-8 are for the usual reader (protobuf-es refuses them).
 */
const decoder = new TextDecoder('utf-8', { fatal: true });
function text(bytes: Buffer, from: number, to: number): string {
  for (let i = from; i < to; i++) if (bytes[i] >= 0x80) return utf8(bytes.subarray(from, to));
  return bytes.toString('latin1', from, to);
}

function utf8(bytes: Buffer): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new NotForHand();
  }
}

/**
 * Reads one buffer from start to end: a message's fields are read up to its end, never copied out; a field of
 * a known number in another wire type, or bytes that end too soon, stop the hand reader.
 */
export class Walk {
  pos = 0;
  readonly bytes: Buffer;
  constructor(bytes: Uint8Array) {
    this.bytes = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The next byte; bytes that end too soon are for the usual reader. */
  private byte(): number {
    if (this.pos >= this.bytes.length) throw new NotForHand();
    return this.bytes[this.pos++];
  }

  /**
   * A tag or a length: a uint32 in at most 5 bytes. One longer, or beyond 32 bits, protobuf-es refuses or cuts
   * in ways of its own: it is for the usual reader.
   */
  uint32(): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const b = this.byte();
      if (shift === 28 && b > 0x0f) throw new NotForHand();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    throw new NotForHand();
  }

  /** An int32 (an enum): the low 32 bits of a varint of up to 10 bytes, signed, as protobuf reads it. */
  int32(): number {
    let low = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      const b = this.byte();
      if (shift < 32) low |= (b & 0x7f) << shift;
      if (b < 0x80) return low | 0;
    }
    throw new NotForHand();
  }

  /** The end of the length-delimited field that starts here. */
  end(): number {
    const length = this.uint32();
    const end = this.pos + length;
    if (end > this.bytes.length) throw new NotForHand();
    return end;
  }

  string(): string {
    const end = this.end();
    const value = text(this.bytes, this.pos, end);
    this.pos = end;
    return value;
  }

  /** Passes over a field of wire type `type`. */
  skip(type: number): void {
    if (type === WireType.Varint) this.int32();
    else if (type === WireType.Bit64) this.pos += 8;
    else if (type === WireType.LengthDelimited) this.pos = this.end();
    else if (type === WireType.Bit32) this.pos += 4;
    else throw new NotForHand();
    if (this.pos > this.bytes.length) throw new NotForHand();
  }
}

function tag(walk: Walk): [field: number, type: number] {
  const t = walk.uint32();
  const field = Math.floor(t / 8);
  if (field === 0) throw new NotForHand();
  return [field, t & 7];
}

/** What `read` gives of a message the hand reader takes; undefined for one it leaves to protobuf-es. */
export function byHand<T>(read: () => T | undefined): T | undefined {
  try {
    return read();
  } catch (err) {
    if (err instanceof NotForHand) return undefined;
    throw err;
  }
}

/**
 * The one field of a FromServer, a message of its oneof: its number, and the walk through it up to `end`.
 * Undefined for no field, another wire type, or more than one field (a oneof given twice: the last wins).
 */
export function soleField(bytes: Uint8Array): { readonly field: number; readonly walk: Walk; readonly end: number } | undefined {
  if (bytes.length === 0) return undefined;
  const walk = new Walk(bytes);
  const [field, type] = tag(walk);
  if (type !== WireType.LengthDelimited) return undefined;
  const end = walk.end();
  return end === bytes.length ? { field, walk, end } : undefined;
}

/** Reads each field up to `end` with `read`, which returns false for a field it does not know (passed over). */
export function fields(walk: Walk, end: number, read: (field: number, type: number) => unknown): void {
  while (walk.pos < end) {
    const [field, type] = tag(walk);
    if (read(field, type) === false) walk.skip(type);
  }
  if (walk.pos !== end) throw new NotForHand();
}

/** The end of a length-delimited field of a known number. */
export function within(walk: Walk, type: number): number {
  expect(type, WireType.LengthDelimited);
  return walk.end();
}

export function stringOf(walk: Walk, type: number): string {
  expect(type, WireType.LengthDelimited);
  return walk.string();
}

export function enumOf(walk: Walk, type: number): number {
  expect(type, WireType.Varint);
  return walk.int32();
}
