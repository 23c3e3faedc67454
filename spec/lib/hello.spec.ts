import { toBinary } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { encodeAgentHello } from '../../lib/codec/hello.js';
import { agentHello } from '../../lib/codec/wire.js';
import { ToServerSchema } from '../../proto/gen/grpc_api_pb.js';

describe('the hello encoded by hand (lib/codec/hello.ts)', () => {
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
});
