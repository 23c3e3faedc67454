// The little of the D-Bus wire format the systemd runtime reads: the EXTERNAL authentication, the framing of
// messages, and the values of a signal's body (any signature), so that systemd's own PropertiesChanged signals
// tell a unit's state without a library or a process per change.

/** A message's length is read from its first 16 bytes; past this the stream is not one the agent follows. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Variants may nest values deeper than one signature does; the specification's bound for a whole message. */
const MAX_DEPTH = 64;

/** What the client writes first: the NUL byte, then EXTERNAL authentication as `uid`, then BEGIN once it is OK. */
export const authRequest = (uid: number): string => `\0AUTH EXTERNAL ${Buffer.from(String(uid)).toString('hex')}\r\n`;
export const AUTH_BEGIN = 'BEGIN\r\n';

export type DbusValue = string | number | boolean | bigint | DbusValue[] | Map<DbusValue, DbusValue>;

/** A message as far as a reader of signals needs it. */
export interface DbusMessage {
  /** 1 method call, 2 method return, 3 error, 4 signal. */
  readonly type: number;
  readonly path?: string;
  readonly interface?: string;
  readonly member?: string;
  readonly signature: string;
  /** The body, not yet read: `readBody` reads it (a reader skips the bodies it does not want). */
  readonly body: Buffer;
  readonly littleEndian: boolean;
  /** Where the body starts in the message: values are aligned from the message's start. */
  readonly bodyOffset: number;
}

export class DbusWireError extends Error {}

/**
 * The whole messages at the start of `buffer`, and how many bytes they took; an incomplete last one waits for more
 * bytes. Throws DbusWireError on bytes that cannot be a message.
 */
export function splitMessages(buffer: Buffer): { messages: DbusMessage[]; used: number } {
  const messages: DbusMessage[] = [];
  let used = 0;
  while (buffer.length - used >= 16) {
    const size = messageSize(buffer, used);
    if (size > MAX_MESSAGE_BYTES) throw new DbusWireError(`a message of ${size} bytes`);
    if (buffer.length - used < size) break;
    messages.push(parseMessage(buffer.subarray(used, used + size)));
    used += size;
  }
  return { messages, used };
}

function messageSize(buffer: Buffer, at: number): number {
  const endian = buffer[at];
  if (endian !== 0x6c && endian !== 0x42) throw new DbusWireError(`no endianness mark at a message's start (${endian})`);
  const little = endian === 0x6c;
  const u32 = (o: number) => (little ? buffer.readUInt32LE(at + o) : buffer.readUInt32BE(at + o));
  const bodyLength = u32(4);
  const fieldsLength = u32(12);
  return align(16 + fieldsLength, 8) + bodyLength;
}

const align = (n: number, to: number) => Math.ceil(n / to) * to;

/** Header field codes (the D-Bus specification's). */
const FIELD = { path: 1, interface: 2, member: 3, signature: 8 } as const;

function parseMessage(bytes: Buffer): DbusMessage {
  const littleEndian = bytes[0] === 0x6c;
  const reader = new Reader(bytes, littleEndian);
  reader.offset = 12;
  const fields = reader.read(parseSignature('a(yv)')[0]) as DbusValue[][];
  const field = (code: number) => {
    const value = fields.find((f) => f[0] === code)?.[1];
    return typeof value === 'string' ? value : undefined;
  };
  const bodyOffset = align(reader.offset, 8);
  return {
    type: bytes[1],
    path: field(FIELD.path),
    interface: field(FIELD.interface),
    member: field(FIELD.member),
    signature: field(FIELD.signature) ?? '',
    body: bytes,
    littleEndian,
    bodyOffset,
  };
}

/** The values of a message's body, in the order of its signature. */
export function readBody(message: DbusMessage): DbusValue[] {
  const reader = new Reader(message.body, message.littleEndian);
  reader.offset = message.bodyOffset;
  return parseSignature(message.signature).map((type) => reader.read(type));
}

/** A type of a signature: a basic code, or a container with its element types. */
type DbusType = { readonly code: string; readonly items: readonly DbusType[] };

/** The D-Bus specification's bounds of a signature: its length, and arrays and structs nested in it. */
const MAX_SIGNATURE_LENGTH = 255;
const MAX_NESTING = 32;
const BASIC_TYPES = 'ybnqiuxtdhsog';

/**
 * The complete types of a signature; throws DbusWireError on one the D-Bus specification forbids: longer than 255,
 * nested deeper than 32 arrays or 32 structs, an empty struct, a dict entry outside an array, one of other than two
 * types or with a key that is not basic. Each element of an array read by a valid signature takes at least one
 * byte, so reading a message is bounded by its length.
 */
export function parseSignature(signature: string): DbusType[] {
  if (signature.length > MAX_SIGNATURE_LENGTH) throw new DbusWireError(`a signature of ${signature.length} characters`);
  let at = 0;
  const one = (arrays: number, structs: number, inArray: boolean): DbusType => {
    if (arrays > MAX_NESTING || structs > MAX_NESTING) throw new DbusWireError(`a signature nested too deep: '${signature}'`);
    const code = signature[at++];
    if (code === 'a') return { code, items: [one(arrays + 1, structs, true)] };
    if (code === '(' || code === '{') {
      const close = code === '(' ? ')' : '}';
      if (code === '{' && !inArray) throw new DbusWireError(`a dict entry outside an array in '${signature}'`);
      const items: DbusType[] = [];
      while (signature[at] !== close) {
        if (at >= signature.length) throw new DbusWireError(`an unclosed '${code}' in '${signature}'`);
        items.push(one(arrays, structs + 1, false));
      }
      at++;
      if (items.length === 0) throw new DbusWireError(`an empty '${code}${close}' in '${signature}'`);
      if (code === '{' && (items.length !== 2 || !BASIC_TYPES.includes(items[0].code))) {
        throw new DbusWireError(`a dict entry of other than a basic key and a value in '${signature}'`);
      }
      return { code, items };
    }
    if (code === undefined || !`${BASIC_TYPES}v`.includes(code)) throw new DbusWireError(`an unknown type '${code}' in '${signature}'`);
    return { code, items: [] };
  };
  const types: DbusType[] = [];
  while (at < signature.length) types.push(one(0, 0, false));
  return types;
}

const ALIGNMENT: Record<string, number> = { y: 1, b: 4, n: 2, q: 2, i: 4, u: 4, x: 8, t: 8, d: 8, h: 4, s: 4, o: 4, g: 1, a: 4, '(': 8, '{': 8, v: 1 };

class Reader {
  offset = 0;
  constructor(
    private readonly bytes: Buffer,
    private readonly little: boolean,
  ) {}

  read(type: DbusType, depth = 0): DbusValue {
    if (depth > MAX_DEPTH) throw new DbusWireError('a value nested too deep');
    this.offset = align(this.offset, ALIGNMENT[type.code]);
    this.need(0);
    const b = this.bytes;
    const le = this.little;
    switch (type.code) {
      case 'y':
        return this.take(1, (o) => b[o]);
      case 'b':
        return this.take(4, (o) => (le ? b.readUInt32LE(o) : b.readUInt32BE(o)) !== 0);
      case 'n':
        return this.take(2, (o) => (le ? b.readInt16LE(o) : b.readInt16BE(o)));
      case 'q':
        return this.take(2, (o) => (le ? b.readUInt16LE(o) : b.readUInt16BE(o)));
      case 'i':
        return this.take(4, (o) => (le ? b.readInt32LE(o) : b.readInt32BE(o)));
      case 'u':
      case 'h':
        return this.take(4, (o) => (le ? b.readUInt32LE(o) : b.readUInt32BE(o)));
      case 'x':
        return this.take(8, (o) => (le ? b.readBigInt64LE(o) : b.readBigInt64BE(o)));
      case 't':
        return this.take(8, (o) => (le ? b.readBigUInt64LE(o) : b.readBigUInt64BE(o)));
      case 'd':
        return this.take(8, (o) => (le ? b.readDoubleLE(o) : b.readDoubleBE(o)));
      case 's':
      case 'o':
        return this.text(this.read({ code: 'u', items: [] }) as number);
      case 'g':
        return this.text(this.read({ code: 'y', items: [] }) as number);
      case 'v': {
        const inner = parseSignature(this.read({ code: 'g', items: [] }) as string);
        if (inner.length !== 1) throw new DbusWireError('a variant of other than one type');
        return this.read(inner[0], depth + 1);
      }
      case '(':
        return type.items.map((item) => this.read(item, depth + 1));
      case '{': {
        const [key, value] = type.items.map((item) => this.read(item, depth + 1));
        return [key, value];
      }
      default: {
        const length = this.read({ code: 'u', items: [] }) as number;
        const element = type.items[0];
        this.offset = align(this.offset, ALIGNMENT[element.code]);
        const end = this.offset + length;
        this.need(length);
        const values: DbusValue[] = [];
        while (this.offset < end) {
          const before = this.offset;
          values.push(this.read(element, depth + 1));
          // A valid signature never reads an element of no bytes; this keeps the loop bounded if one did.
          if (this.offset === before) throw new DbusWireError('an array element of no bytes');
        }
        if (this.offset !== end) throw new DbusWireError('an array whose elements overrun its length');
        return element.code === '{' ? new Map(values.map((entry) => entry as [DbusValue, DbusValue])) : values;
      }
    }
  }

  private need(bytes: number): void {
    if (this.offset + bytes > this.bytes.length) throw new DbusWireError('a value past the end of its message');
  }

  private take<T extends DbusValue>(size: number, at: (offset: number) => T): T {
    this.need(size);
    const value = at(this.offset);
    this.offset += size;
    return value;
  }

  private text(length: number): string {
    this.need(length + 1);
    const value = this.bytes.toString('utf8', this.offset, this.offset + length);
    this.offset += length + 1;
    return value;
  }
}

/** systemd's object path of a unit: every byte but a letter or digit (and a leading digit) as `_xx`. */
export function unitPath(unit: string): string {
  const escaped = [...Buffer.from(unit)]
    .map((byte, i) => {
      const c = String.fromCharCode(byte);
      return /[A-Za-z]/.test(c) || (i > 0 && /[0-9]/.test(c)) ? c : `_${byte.toString(16).padStart(2, '0')}`;
    })
    .join('');
  return `/org/freedesktop/systemd1/unit/${escaped}`;
}
