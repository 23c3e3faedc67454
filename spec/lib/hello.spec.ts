import { create, toBinary } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { encodeAgentHello, encodeAgentLoadStatus } from '../../lib/codec/hello.js';
import { toServerMessage } from '../../lib/codec/wire.js';
import { ToServerSchema } from '../../proto/gen/grpc_api_pb.js';

/** The hello as protobuf-es builds it by reflection: a ToServer holding an AgentHello, tags left out when there are none. */
const agentHello = (agentName: string, protocolVersion: string, tags: Record<string, string>) =>
  create(ToServerSchema, {
    ToServerEnum: { case: 'agentHello', value: { agentName, protocolVersion, tags: Object.keys(tags).length > 0 ? { tags: { ...tags } } : undefined } },
  });

describe('the messages encoded by hand (lib/codec/hello.ts)', () => {
  // swdd~agent-sends-hello~1
  it('is byte for byte what the protobuf code writes: names of any length and script, with and without tags', () => {
    const cases: Array<[string, string, Record<string, string>]> = [
      ['agent_A', '1.0.1', {}],
      ['agent_A', '0.8.0', {}],
      ['a'.repeat(200), '1.0.1', { location: 'front', model: 'x1' }],
      ['agent_B', '1.0.1', { ключ: 'значение ✓', empty: '', '': 'no key' }],
      ['agent_C', '1.0.1', Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`tag${i}`, 'v'.repeat(i)]))],
    ];
    for (const [name, version, tags] of cases)
      expect(Buffer.from(encodeAgentHello(name, version, tags)).toString('hex'), name).to.equal(
        Buffer.from(toBinary(ToServerSchema, agentHello(name, version, tags))).toString('hex'),
      );
  });

  // swdd~agent-sends-node-resource-availability-to-server~1
  it('the load status is byte for byte what the protobuf code writes: idle and busy, little and much memory', () => {
    const cases: Array<[string, number, number]> = [
      ['agent_A', 0, 0],
      ['agent_A', 1, 1],
      ['a'.repeat(200), 100, 24 * 2 ** 30],
      ['agent_B', 127, 128],
      ['agent_C', 50, 2 ** 52 + 1],
    ];
    for (const [agentName, cpuUsage, freeMemory] of cases)
      expect(Buffer.from(encodeAgentLoadStatus(agentName, cpuUsage, freeMemory)).toString('hex'), `${cpuUsage} ${freeMemory}`).to.equal(
        Buffer.from(toBinary(ToServerSchema, toServerMessage({ kind: 'agentLoadStatus', agentName, cpuUsage, freeMemory }))).toString('hex'),
      );
  });
});
