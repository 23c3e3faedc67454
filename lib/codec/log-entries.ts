// The agent's most frequent message, a batch of log entries, written without reflection: the same bytes
// protobuf-es writes (fields in order, an empty string left out, a message field always written), at a
// fraction of the cost per entry.
//   grpc_api.ToServer { logEntriesResponse = 7 { requestId = 1; logEntriesResponse = 2 { repeated logEntries = 1
//     ank_base.LogEntry { workloadName = 1 (WorkloadInstanceName); message = 2 } } } }
import { create, toBinary } from '@bufbuild/protobuf';
import { ankBase } from './descriptors.cjs';
import type { LogEntry } from '../messages.js';
import type { WorkloadInstanceName } from '../workload.js';
import { Writer, fieldSize, stringFieldSize } from './proto-writer.js';

/** A ToServer with a LogEntriesResponse of `entries` for `requestId`, encoded. */
export function encodeLogEntries(requestId: string, entries: readonly LogEntry[]): Uint8Array {
  // The entries of one stream share one instance name object: it is encoded once.
  const names = new Map<WorkloadInstanceName, Uint8Array>();
  const nameOf = (n: WorkloadInstanceName): Uint8Array => {
    const known = names.get(n);
    if (known) return known;
    const schema = ankBase().WorkloadInstanceNameSchema;
    const bytes = toBinary(schema, create(schema, n));
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
