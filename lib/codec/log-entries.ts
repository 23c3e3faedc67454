// The agent's most frequent message, a batch of log entries, written without reflection: the same bytes
// protobuf-es writes (fields in order, an empty string left out, a message field always written), at a
// fraction of the cost per entry.
//   grpc_api.ToServer { logEntriesResponse = 7 { requestId = 1; logEntriesResponse = 2 { repeated logEntries = 1
//     ank_base.LogEntry { workloadName = 1 (WorkloadInstanceName); message = 2 } } } }
import { create, toBinary } from '@bufbuild/protobuf';
import { WorkloadInstanceNameSchema } from '../../proto/gen/ank_base_pb.js';
import type { LogEntry } from '../messages.js';
import type { WorkloadInstanceName } from '../workload.js';

const varintSize = (n: number) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);
/** A length-delimited field of `size` bytes, with its tag and length. */
const fieldSize = (size: number) => 1 + varintSize(size) + size;
const stringFieldSize = (size: number) => (size > 0 ? fieldSize(size) : 0);

/** Writes into a buffer of the exact size. */
class Writer {
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

  string(field: number, text: string, size: number): void {
    if (size === 0) return;
    this.field(field, size);
    this.at += this.buf.write(text, this.at);
  }

  bytes(field: number, bytes: Uint8Array): void {
    this.field(field, bytes.length);
    this.buf.set(bytes, this.at);
    this.at += bytes.length;
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

/** A ToServer with a LogEntriesResponse of `entries` for `requestId`, encoded. */
export function encodeLogEntries(requestId: string, entries: readonly LogEntry[]): Uint8Array {
  // The entries of one stream share one instance name object: it is encoded once.
  const names = new Map<WorkloadInstanceName, Uint8Array>();
  const nameOf = (n: WorkloadInstanceName): Uint8Array => {
    const known = names.get(n);
    if (known) return known;
    const bytes = toBinary(WorkloadInstanceNameSchema, create(WorkloadInstanceNameSchema, n));
    names.set(n, bytes);
    return bytes;
  };
  const entrySizes = entries.map((e) => fieldSize(nameOf(e.instanceName).length) + stringFieldSize(e.bytes));
  const listSize = entrySizes.reduce((sum, size) => sum + fieldSize(size), 0);
  const idSize = Buffer.byteLength(requestId);
  const responseSize = stringFieldSize(idSize) + fieldSize(listSize);
  const out = new Writer(fieldSize(responseSize));
  out.field(7, responseSize).string(1, requestId, idSize);
  out.field(2, listSize);
  entries.forEach((e, i) => {
    out.field(1, entrySizes[i]).bytes(1, nameOf(e.instanceName));
    out.string(2, e.message, e.bytes);
  });
  return out.buf;
}
