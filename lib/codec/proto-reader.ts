// What the decoders written without reflection share (./workload-states.ts, ./workload-updates.ts): a walk
// through one buffer. Each decoder gives the fields protobuf-es gives for its message, as its spec checks; a
// message it does not take whole (a known field in another wire type, bytes that end too soon or are not UTF-8,
// a tag or a length beyond 32 bits) is left to protobuf-es, which says what is wrong.
import { WireType } from '@bufbuild/protobuf/wire';

export { WireType };

/** A known field in a wire type it does not have: the usual reader decides what that is. */
export class NotForHand extends Error {}
export const expect = (type: number, wanted: WireType) => {
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

  /** A varint of up to 64 bits, passed over (a field of no interest). */
  varint(): void {
    for (let n = 0; n < 10; n++) {
      if (this.pos >= this.bytes.length) throw new NotForHand();
      if (this.bytes[this.pos++] < 0x80) return;
    }
    throw new NotForHand();
  }

  /**
   * A tag or a length: a uint32 in at most 5 bytes. One longer, or beyond 32 bits, protobuf-es refuses or cuts
   * in ways of its own: it is for the usual reader.
   */
  uint32(): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.bytes.length) throw new NotForHand();
      const b = this.bytes[this.pos++];
      if (shift === 28 && b > 0x0f) throw new NotForHand();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    throw new NotForHand();
  }

  /** An int32 (an enum): the low 32 bits of its varint, signed, as protobuf reads it. */
  int32(): number {
    let low = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.bytes.length) throw new NotForHand();
      const b = this.bytes[this.pos++];
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
    if (type === WireType.Varint) this.varint();
    else if (type === WireType.Bit64) this.pos += 8;
    else if (type === WireType.LengthDelimited) this.pos = this.end();
    else if (type === WireType.Bit32) this.pos += 4;
    else throw new NotForHand();
    if (this.pos > this.bytes.length) throw new NotForHand();
  }
}

export function tag(walk: Walk): [field: number, type: number] {
  const t = walk.uint32();
  const field = Math.floor(t / 8);
  if (field === 0) throw new NotForHand();
  return [field, t & 7];
}
