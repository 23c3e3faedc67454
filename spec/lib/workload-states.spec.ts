// The server's workload states read by hand (lib/codec/workload-states.ts) against protobuf-es reading the same bytes.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { expect } from 'chai';
import { fromServerBytes, fromServerMessage } from '../../lib/codec/wire.js';
import { type WireWorkloadState, workloadStatesOf } from '../../lib/codec/workload-states.js';
import type { WorkloadState } from '../../proto/gen/ank_base_pb.js';
import { FromServerSchema } from '../../proto/gen/grpc_api_pb.js';

/** What protobuf-es reads of the same fields. */
const fieldsOf = (s: WorkloadState): WireWorkloadState => ({
  instanceName: s.instanceName && { workloadName: s.instanceName.workloadName, agentName: s.instanceName.agentName, id: s.instanceName.id },
  executionState: s.executionState && {
    additionalInfo: s.executionState.additionalInfo,
    ExecutionStateEnum: { case: s.executionState.ExecutionStateEnum.case, value: s.executionState.ExecutionStateEnum.value } as never,
  },
});

/** A pseudo-random generator, so that a failure can be run again. */
function random(seed: number) {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

const CASES = ['agentDisconnected', 'pending', 'running', 'stopping', 'succeeded', 'failed', 'notScheduled', 'removed'] as const;
/** Enum values a server could send that the agent does not know, the negative ones 10 bytes long on the wire. */
const ODD_VALUES = [-1, -2147483648, 2147483647, 128, 300];
const WORDS = ['', 'web', 'agent_A', 'ключ', '✓ done', 'a'.repeat(300), '0123456789abcdef'];

describe('workload states read by hand (lib/codec/workload-states.ts)', () => {
  // swdd~agent-stores-workload-states-of-its-workloads~1
  it('reads 2 000 random messages as protobuf-es does, and the agent makes the same states and warnings of them', () => {
    const next = random(7);
    const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)];
    for (let round = 0; round < 2000; round++) {
      const workloadStates = Array.from({ length: Math.floor(next() * 6) }, () => ({
        instanceName: next() < 0.9 ? { workloadName: pick(WORDS), agentName: pick(WORDS), id: pick(WORDS) } : undefined,
        executionState:
          next() < 0.9
            ? {
                additionalInfo: next() < 0.7 ? pick(WORDS) : undefined,
                ExecutionStateEnum:
                  next() < 0.95 ? { case: pick(CASES), value: next() < 0.9 ? Math.floor(next() * 10) : pick(ODD_VALUES) } : { case: undefined },
              }
            : undefined,
      }));
      const bytes = toBinary(
        FromServerSchema,
        create(FromServerSchema, { FromServerEnum: { case: 'updateWorkloadState', value: { workloadStates } as never } }),
      );
      const byReflection = fromBinary(FromServerSchema, bytes);
      const hand = workloadStatesOf(bytes);
      expect(hand, `round ${round}`).to.deep.equal(
        byReflection.FromServerEnum.case === 'updateWorkloadState' ? byReflection.FromServerEnum.value.workloadStates.map(fieldsOf) : undefined,
      );
      const warned: string[][] = [[], []];
      expect(fromServerBytes(bytes, (w) => warned[0].push(w))).to.deep.equal(
        fromServerMessage(byReflection, (w) => warned[1].push(`In a updateWorkloadState from the server, ${w}.`)),
      );
      expect(warned[0]).to.deep.equal(warned[1]);
    }
  });

  it('merges a name or a state given twice, skips unknown fields, and leaves to protobuf-es what it does not take', () => {
    const name = (workloadName: string, id: string) =>
      new BinaryWriter().tag(1, WireType.LengthDelimited).string(workloadName).tag(3, WireType.LengthDelimited).string(id).finish();
    const state = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .bytes(name('web', 'a'))
      .tag(1, WireType.LengthDelimited)
      .bytes(new BinaryWriter().tag(2, WireType.LengthDelimited).string('agent_A').finish())
      .tag(2, WireType.LengthDelimited)
      .bytes(new BinaryWriter().tag(4, WireType.Varint).int32(0).tag(1, WireType.LengthDelimited).string('up').tag(77, WireType.Varint).int32(5).finish())
      .finish();
    const bytes = new BinaryWriter()
      .tag(2, WireType.LengthDelimited)
      .bytes(new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(state).tag(9, WireType.Varint).int32(1).finish())
      .finish();
    const byReflection = fromBinary(FromServerSchema, bytes);
    expect(workloadStatesOf(bytes)).to.deep.equal(
      byReflection.FromServerEnum.case === 'updateWorkloadState' ? byReflection.FromServerEnum.value.workloadStates.map(fieldsOf) : [],
    );
    expect(workloadStatesOf(bytes)?.[0].instanceName).to.deep.equal({ workloadName: 'web', agentName: 'agent_A', id: 'a' });
    // Another message, a oneof given twice, a known field in another wire type: protobuf-es reads them.
    const hello = toBinary(FromServerSchema, create(FromServerSchema, { FromServerEnum: { case: 'serverHello', value: {} } }));
    expect(workloadStatesOf(hello)).to.equal(undefined);
    expect(workloadStatesOf(new Uint8Array([...bytes, ...bytes]))).to.equal(undefined);
    const oddType = new BinaryWriter().tag(2, WireType.LengthDelimited).bytes(new BinaryWriter().tag(1, WireType.Varint).int32(3).finish()).finish();
    expect(workloadStatesOf(oddType)).to.equal(undefined);
    expect(workloadStatesOf(new Uint8Array([0x12, 0x05, 0x0a]))).to.equal(undefined);
  });
});
