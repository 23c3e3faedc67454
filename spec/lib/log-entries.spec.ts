import { toBinary } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { ToServerSchema } from '../../proto/gen/grpc_api_pb.js';
import { encodeLogEntries } from '../../lib/codec/log-entries.js';
import { toServerMessage } from '../../lib/codec/wire.js';
import { type LogEntry, logEntry } from '../../lib/messages.js';
import { workload } from '../../scripts/harness/fixtures.js';

const app = workload('app').instanceName;
const other = workload('other', { agent: 'agent_B' }).instanceName;
const reflected = (requestId: string, entries: LogEntry[]) => toBinary(ToServerSchema, toServerMessage({ kind: 'logEntries', requestId, entries }));

describe('log entries written without reflection (lib/codec/log-entries.ts)', () => {
  it('are the bytes protobuf-es writes, whatever the entries', () => {
    const cases: Array<[string, LogEntry[]]> = [
      ['r1', [logEntry(app, 'one')]],
      ['app@r2', [logEntry(app, 'one'), logEntry(other, 'two'), logEntry(app, '')]],
      ['', [logEntry(app, 'no request id')]],
      ['r3', []],
      ['r4', [logEntry(app, 'äöü 日本 🚗 \u0000 \uFFFD a lone \uD800 surrogate')]],
      ['r5', [logEntry({ workloadName: '', agentName: '', id: '' }, 'an empty name')]],
      ['r6', [logEntry(app, 'x'.repeat(300)), logEntry(app, 'y'.repeat(70_000))]],
      ['r7', [logEntry(app, 'z'.repeat(2 * 1024 * 1024 - 100))]],
      ['r8', Array.from({ length: 1000 }, (_, i) => logEntry(app, `line ${i}`))],
    ];
    for (const [requestId, entries] of cases) {
      expect(
        Buffer.from(encodeLogEntries(requestId, entries)).equals(Buffer.from(reflected(requestId, entries))),
        `${requestId}: ${entries.length} entries`,
      ).to.equal(true);
    }
  });
});
