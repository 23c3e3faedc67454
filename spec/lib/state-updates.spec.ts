import { toBinary } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { ToServerSchema } from '../../proto/gen/grpc_api_pb.js';
import { encodeWorkloadStates } from '../../lib/codec/state-updates.js';
import { toServerMessage } from '../../lib/codec/wire.js';
import { ExecutionState } from '../../lib/execution-state.js';
import type { WorkloadState } from '../../lib/messages.js';
import { workload } from '../../scripts/harness/fixtures.js';

const app = workload('app').instanceName;
const reflected = (states: WorkloadState[]) => toBinary(ToServerSchema, toServerMessage({ kind: 'updateWorkloadState', states }));
const everyState = Object.values(ExecutionState).map((make) => ({ instanceName: app, executionState: make() }));

describe('workload states written without reflection (lib/codec/state-updates.ts)', () => {
  it('are the bytes protobuf-es writes, for every state and whatever the names and infos (swdd~agent-sends-workload-states-of-its-workloads-to-server~2)', () => {
    const cases: Array<[string, WorkloadState[]]> = [
      ['every state and substate', everyState],
      ['none', []],
      ['empty names', [{ instanceName: { workloadName: '', agentName: '', id: '' }, executionState: ExecutionState.running() }]],
      ['an exit code', [{ instanceName: app, executionState: { ...ExecutionState.failed("Exit code: '137'"), exitCode: 137 } }]],
      [
        'unicode',
        [{ instanceName: { workloadName: 'äöü 日本', agentName: '🚗', id: 'a lone \uD800' }, executionState: ExecutionState.failed('\u0000 \uFFFD') }],
      ],
      ['long texts', [{ instanceName: { ...app, workloadName: 'w'.repeat(300) }, executionState: ExecutionState.startingFailed('x'.repeat(70_000)) }]],
      [
        'many',
        Array.from({ length: 2000 }, (_, i) => ({
          instanceName: { ...app, workloadName: `w${i}` },
          executionState: everyState[i % everyState.length].executionState,
        })),
      ],
    ];
    for (const [name, states] of cases) {
      expect(Buffer.from(encodeWorkloadStates(states)).equals(Buffer.from(reflected(states))), name).to.equal(true);
    }
  });
});
