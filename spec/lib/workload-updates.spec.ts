// The server's workload updates read by hand (lib/codec/workload-updates.ts) against protobuf-es reading the same bytes.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { expect } from 'chai';
import { fromServerBytes, fromServerMessage } from '../../lib/codec/wire.js';
import { workloadUpdateOf } from '../../lib/codec/workload-updates.js';
import { FromServerSchema } from '../../proto/gen/grpc_api_pb.js';

/** A pseudo-random generator, so that a failure can be run again. */
function random(seed: number) {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

const WORDS = ['', 'web', 'agent_A', 'ключ', '✓ done', 'a'.repeat(300), 'image: ghcr.io/x:1\ncommandOptions: ["-p", "8080:80"]'];
/** Enum values a server could send, the agent's own and some it does not know (negative ones are 10 bytes long). */
const ENUMS = [0, 1, 2, 5, -1, 2147483647, 300];

/** What the agent makes of the bytes, and what it warns of, by the agent's own way and by protobuf-es alone. */
function bothWays(bytes: Uint8Array) {
  const read = (how: () => unknown) => {
    try {
      return { value: how() };
    } catch (err) {
      return { error: (err as Error).message };
    }
  };
  const warned: string[][] = [[], []];
  const agent = read(() => fromServerBytes(bytes, (w) => warned[0].push(w)));
  const reflection = read(() => {
    const m = fromBinary(FromServerSchema, bytes);
    return fromServerMessage(m, (w) => warned[1].push(`In a ${m.FromServerEnum.case} from the server, ${w}.`));
  });
  return { agent, reflection, warned };
}

function randomWorkload(next: () => number) {
  const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)];
  const some = <T>(make: () => T, most = 3) => Array.from({ length: Math.floor(next() * (most + 1)) }, make);
  const record = <T>(value: () => T) => Object.fromEntries(some(() => [pick(WORDS), value()]));
  const rule = () =>
    next() < 0.5
      ? { AccessRightsRuleEnum: { case: 'stateRule' as const, value: { operation: pick(ENUMS), filterMasks: some(() => pick(WORDS)) } } }
      : { AccessRightsRuleEnum: { case: 'logRule' as const, value: { workloadNames: some(() => pick(WORDS)) } } };
  const file = () => ({
    mountPoint: pick(WORDS),
    FileContent:
      next() < 0.5 ? { case: 'data' as const, value: pick(WORDS) } : next() < 0.8 ? { case: 'binaryData' as const, value: pick(WORDS) } : { case: undefined },
  });
  return {
    agent: next() < 0.9 ? pick(WORDS) : undefined,
    restartPolicy: next() < 0.8 ? pick(ENUMS) : undefined,
    dependencies: next() < 0.7 ? { dependencies: record(() => pick(ENUMS)) } : undefined,
    tags: next() < 0.5 ? { tags: record(() => pick(WORDS)) } : undefined,
    runtime: next() < 0.9 ? pick(['podman', 'podman-kube', 'containerd', '']) : undefined,
    runtimeConfig: next() < 0.9 ? pick(WORDS) : undefined,
    controlInterfaceAccess: next() < 0.5 ? { allowRules: some(rule), denyRules: some(rule) } : undefined,
    configs: next() < 0.3 ? { configs: record(() => pick(WORDS)) } : undefined,
    files: next() < 0.3 ? { files: some(file) } : undefined,
  };
}

/** A length-delimited field around `bytes`. */
const field = (number: number, bytes: Uint8Array) => new BinaryWriter().tag(number, WireType.LengthDelimited).bytes(bytes).finish();
const join = (...parts: Uint8Array[]) => new Uint8Array(parts.flatMap((p) => [...p]));
/** A FromServer with an UpdateWorkload whose fields are `fields` as they are. */
const update = (...fields: Uint8Array[]) => field(1, join(...fields));

describe('workload updates read by hand (lib/codec/workload-updates.ts)', () => {
  // swdd~agent-handles-update-workload-requests~1
  it('reads 2 000 random ServerHellos and UpdateWorkloads as protobuf-es does: the same workloads and warnings', () => {
    const next = random(11);
    const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)];
    const name = () => (next() < 0.9 ? { workloadName: pick(WORDS), agentName: pick(WORDS), id: pick(WORDS) } : undefined);
    for (let round = 0; round < 2000; round++) {
      const addedWorkloads = Array.from({ length: Math.floor(next() * 4) }, () => ({
        instanceName: name(),
        workload: next() < 0.9 ? randomWorkload(next) : undefined,
      }));
      const deletedWorkloads = Array.from({ length: Math.floor(next() * 3) }, () => ({
        instanceName: name(),
        dependencies: Object.fromEntries(Array.from({ length: Math.floor(next() * 3) }, () => [pick(WORDS), pick(ENUMS)])),
      }));
      const message =
        next() < 0.3
          ? { FromServerEnum: { case: 'serverHello', value: { addedWorkloads } } }
          : { FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads, deletedWorkloads } } };
      const bytes = toBinary(FromServerSchema, create(FromServerSchema, message as never));
      expect(workloadUpdateOf(bytes), `round ${round}: read by hand`).to.not.equal(undefined);
      const { agent, reflection, warned } = bothWays(bytes);
      expect(agent, `round ${round}`).to.deep.equal(reflection);
      expect(warned[0]).to.deep.equal(warned[1]);
    }
  });

  // swdd~agent-handles-update-workload-requests~1
  it('passes over unknown fields, takes the last of a map key or a oneof given twice, and leaves merged messages to protobuf-es', () => {
    const name = field(1, new BinaryWriter().tag(1, WireType.LengthDelimited).string('web').tag(2, WireType.LengthDelimited).string('agent_A').finish());
    const entry = (key: string, value: string) =>
      field(1, new BinaryWriter().tag(1, WireType.LengthDelimited).string(key).tag(2, WireType.LengthDelimited).string(value).finish());
    const unknown = new BinaryWriter()
      .tag(15, WireType.Varint)
      .int32(7)
      .tag(16, WireType.LengthDelimited)
      .string('x')
      .tag(17, WireType.Bit64)
      .fixed64(1)
      .finish();
    const workload = join(
      new BinaryWriter().tag(5, WireType.LengthDelimited).string('podman').tag(6, WireType.LengthDelimited).string('image: a').finish(),
      field(4, join(entry('k', 'one'), entry('k', 'two'), unknown)),
      field(
        9,
        field(
          1,
          new BinaryWriter()
            .tag(1, WireType.LengthDelimited)
            .string('/f')
            .tag(2, WireType.LengthDelimited)
            .string('text')
            .tag(3, WireType.LengthDelimited)
            .string('b64')
            .finish(),
        ),
      ),
      unknown,
    );
    const bytes = update(field(1, join(name, field(2, workload), unknown)), unknown);
    const hand = workloadUpdateOf(bytes);
    expect(hand?.addedWorkloads[0].workload?.tags?.tags).to.deep.equal({ k: 'two' });
    expect(hand?.addedWorkloads[0].workload?.files?.files[0].FileContent).to.deep.equal({ case: 'binaryData', value: 'b64' });
    const { agent, reflection } = bothWays(bytes);
    expect(agent).to.deep.equal(reflection);
    expect((agent.value as { added: unknown[] }).added).to.have.length(1);

    // A message field given twice merges: protobuf-es reads it, and the agent gets what protobuf-es gives.
    const twiceNamed = update(field(1, join(name, field(1, new BinaryWriter().tag(3, WireType.LengthDelimited).string('id1').finish()), field(2, workload))));
    expect(workloadUpdateOf(twiceNamed)).to.equal(undefined);
    expect(bothWays(twiceNamed).agent).to.deep.equal(bothWays(twiceNamed).reflection);
    expect((bothWays(twiceNamed).agent.value as { added: { instanceName: { id: string } }[] }).added[0].instanceName.id).to.equal('id1');
    const rule = (n: number) => field(n, new BinaryWriter().tag(1, WireType.Varint).int32(1).finish());
    const twiceRuled = update(field(1, join(name, field(2, field(7, field(1, join(rule(1), rule(1))))))));
    expect(workloadUpdateOf(twiceRuled)).to.equal(undefined);
    const otherRule = update(field(1, join(name, field(2, field(7, field(1, join(rule(1), field(2, new Uint8Array()))))))));
    expect(workloadUpdateOf(otherRule)?.addedWorkloads[0].workload?.controlInterfaceAccess?.allowRules[0].AccessRightsRuleEnum.case).to.equal('logRule');
    expect(bothWays(otherRule).agent).to.deep.equal(bothWays(otherRule).reflection);
  });

  // swdd~agent-handles-update-workload-requests~1
  it('leaves to protobuf-es another message, a oneof given twice, a known field in another wire type and bytes cut short', () => {
    const one = toBinary(
      FromServerSchema,
      create(FromServerSchema, { FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: [{ workload: { runtime: 'podman' } }] } } }),
    );
    expect(workloadUpdateOf(one)).to.not.equal(undefined);
    const states = toBinary(FromServerSchema, create(FromServerSchema, { FromServerEnum: { case: 'updateWorkloadState', value: {} } }));
    for (const bytes of [
      states,
      join(one, one),
      update(field(1, new BinaryWriter().tag(2, WireType.Varint).int32(3).finish())),
      one.subarray(0, one.length - 2),
    ]) {
      expect(workloadUpdateOf(bytes)).to.equal(undefined);
      expect(bothWays(bytes).agent).to.deep.equal(bothWays(bytes).reflection);
    }
  });

  // swdd~agent-handles-update-workload-requests~1
  it('gives what protobuf-es gives, or fails as it fails, for 3 000 messages with bytes changed at random', () => {
    const next = random(23);
    const base = toBinary(
      FromServerSchema,
      create(FromServerSchema, {
        FromServerEnum: {
          case: 'updateWorkload',
          value: {
            addedWorkloads: [{ instanceName: { workloadName: 'web', agentName: 'agent_A', id: 'abc' }, workload: randomWorkload(random(5)) as never }],
            deletedWorkloads: [{ instanceName: { workloadName: 'old', agentName: 'agent_A', id: 'def' }, dependencies: { web: 1 } }],
          },
        },
      }),
    );
    for (let round = 0; round < 3000; round++) {
      const bytes = Uint8Array.from(base);
      for (let k = 1 + Math.floor(next() * 3); k > 0; k--) bytes[Math.floor(next() * bytes.length)] = Math.floor(next() * 256);
      const { agent, reflection, warned } = bothWays(bytes);
      expect(agent, `round ${round}`).to.deep.equal(reflection);
      expect(warned[0]).to.deep.equal(warned[1]);
    }
  });
});
