import { toBinary } from '@bufbuild/protobuf';
import { map } from 'rxjs';
import { ExecutionStateSchema } from '../../proto/gen/ank_base_pb.js';
import { executionStateTo } from '../../lib/codec/wire.js';
import { type ExecutionState, formatState } from '../../lib/execution-state.js';

import { podmanReading } from '../../lib/runtimes/podman/container-state.js';
import { stateChecker } from '../../streams/state-checker.js';
import { testScheduler } from '../helpers/virtual-time.js';

const shown = (s: ExecutionState) => formatState(s);

describe('the state checker of the podman runtime', () => {
  // swdd~generic-state-checker-sends-workload-state~2, swdd~agent-provides-generic-state-checker-implementation~1, swdd~podman-state-getter-uses-podmancli~1
  it('emits only changes; `stopped` is reported only once it lasted a second', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const snap = (poll: number, state: string, exitCode = 0) => ({ poll, containers: [{ id: 'id1', state, exitCode }] });
      const cache = {
        fresh: () =>
          cold('a-b-c-d-e 999ms f-g', {
            a: snap(1, 'running'),
            b: snap(2, 'running'),
            c: snap(3, 'stopped', 3),
            d: snap(4, 'exited', 3),
            e: snap(5, 'stopped'),
            f: snap(6, 'stopped'),
            g: { poll: 7 },
          }),
      };
      expectObservable(stateChecker(cache)(podmanReading('id1')).pipe(map(shown))).toBe('a-----d 1001ms f-g', {
        a: 'Running(Ok)',
        d: "Failed(ExecFailed): Exit code: '3'",
        f: 'Stopping(Stopping): stopped',
        g: 'Failed(Unknown): Podman could not be asked for the container states.',
      });
    });
  });
});

describe('the state checker and quick polls', () => {
  it('two quick polls that both see an exiting container `stopped` (events died + cleanup) do not report Stopping', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const snap = (poll: number, state: string, exitCode = 0) => ({ poll, containers: [{ id: 'id1', state, exitCode }] });
      const cache = {
        fresh: () => cold('a 100ms s 50ms t 100ms x', { a: snap(1, 'running'), s: snap(2, 'stopped', 3), t: snap(3, 'stopped', 3), x: snap(4, 'exited', 3) }),
      };
      expectObservable(stateChecker(cache)(podmanReading('id1')).pipe(map(shown))).toBe('a 252ms x', {
        a: 'Running(Ok)',
        x: "Failed(ExecFailed): Exit code: '3'",
      });
    });
  });
});

describe('the state checker and the time a change was heard', () => {
  it('each state it emits carries when the change it shows was heard (for the report-time metric) and the exit code of an ended run; the wire form carries neither', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const snap = (poll: number, state: string, heardAt: number) => ({ poll, containers: [{ id: 'id1', state, exitCode: 2 }], heardAt });
      const cache = { fresh: () => cold('a-b-c', { a: snap(1, 'running', 100), b: snap(2, 'running', 200), c: snap(3, 'exited', 290) }) };
      const wire = (s: ExecutionState) => Buffer.from(toBinary(ExecutionStateSchema, executionStateTo(s)));
      const onWire = (s: ExecutionState) => wire(s).equals(wire({ state: s.state, substate: s.substate, additionalInfo: s.additionalInfo } as ExecutionState));
      expectObservable(stateChecker(cache)(podmanReading('id1')).pipe(map((s) => [formatState(s), s.heardAt, s.exitCode, onWire(s)]))).toBe('a---c', {
        a: ['Running(Ok)', 100, undefined, true],
        c: ["Failed(ExecFailed): Exit code: '2'", 290, 2, true],
      });
    });
  });
});
