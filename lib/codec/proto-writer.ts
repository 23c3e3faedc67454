// What the encoders written without reflection share (./log-entries.ts, ./state-updates.ts): the sizes of
// protobuf's fields and a writer into a buffer of the exact size. Each encoder writes the bytes protobuf-es
// writes for its message, as its spec checks.

export const varintSize = (n: number) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);
/** A length-delimited field of `size` bytes, with its tag and length. */
export const fieldSize = (size: number) => 1 + varintSize(size) + size;
/** A string field of `size` bytes: left out when empty (a proto3 default). */
export const stringFieldSize = (size: number) => (size > 0 ? fieldSize(size) : 0);

/** Writes into a buffer of the exact size. Field numbers below 16: a tag is one byte. */
export class Writer {
  readonly buf: Buffer;
  private at = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  /** The tag (wire type 2) and length of a length-delimited field. */
  field(field: number, size: number): this {
    this.varint((field << 3) | 2);
    this.varint(size);
    return this;
  }

  /** A string field, left out when empty. */
  string(field: number, text: string, size: number): this {
    if (size > 0) this.text(field, text, size);
    return this;
  }

  /** A string field written even when empty (one with presence). */
  text(field: number, text: string, size: number): this {
    this.field(field, size);
    this.at += this.buf.write(text, this.at);
    return this;
  }

  bytes(field: number, bytes: Uint8Array): this {
    this.field(field, bytes.length);
    this.buf.set(bytes, this.at);
    this.at += bytes.length;
    return this;
  }

  /** A varint field (wire type 0), written even when 0 (a oneof's member). */
  number(field: number, value: number): this {
    this.varint(field << 3);
    this.varint(value);
    return this;
  }

  private varint(n: number): void {
    let value = n;
    while (value >= 0x80) {
      this.buf[this.at++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.buf[this.at++] = value;
  }
}
