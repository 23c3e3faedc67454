import { toBinary } from '@bufbuild/protobuf';
import { asyncScheduler, map } from 'rxjs';
import { expect } from 'chai';
import { ExecutionStateSchema } from '../../proto/gen/ank_base_pb.js';
import { executionStateTo } from '../../lib/codec/wire.js';
import { type ExecutionState, formatState } from '../../lib/execution-state.js';

import { podmanReading } from '../../lib/runtimes/podman/container-state.js';
import { stateChecker } from '../../lib/runtimes/containers/state-checker.js';
import { testScheduler } from '../helpers/virtual-time.js';

const shown = (s: ExecutionState) => formatState(s);

describe('the state checker of the podman runtime', () => {
  // swdd~generic-state-checker-sends-workload-state~2, swdd~agent-provides-generic-state-checker-implementation~1, swdd~podman-state-getter-uses-podmancli~1
  it('emits only changes; `stopped` is reported only once it lasted a second', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const snap = (poll: number, state: string, exitCode = 0) => ({ poll, containers: new Map([['id1', { id: 'id1', state, exitCode }]]) });
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
      expectObservable(stateChecker(cache, asyncScheduler, 'Podman')(podmanReading('id1')).pipe(map(shown))).toBe('a-----d 1001ms f-g', {
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
      const snap = (poll: number, state: string, exitCode = 0) => ({ poll, containers: new Map([['id1', { id: 'id1', state, exitCode }]]) });
      const cache = {
        fresh: () => cold('a 100ms s 50ms t 100ms x', { a: snap(1, 'running'), s: snap(2, 'stopped', 3), t: snap(3, 'stopped', 3), x: snap(4, 'exited', 3) }),
      };
      expectObservable(stateChecker(cache, asyncScheduler, 'Podman')(podmanReading('id1')).pipe(map(shown))).toBe('a 252ms x', {
        a: 'Running(Ok)',
        x: "Failed(ExecFailed): Exit code: '3'",
      });
    });
  });
});

describe('the state checker and the time a change was heard', () => {
  it('each state it emits carries when the change it shows was heard (for the report-time metric) and the exit code of an ended run; the wire form carries neither', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const snap = (poll: number, state: string, heardAt: number) => ({ poll, containers: new Map([['id1', { id: 'id1', state, exitCode: 2 }]]), heardAt });
      const cache = { fresh: () => cold('a-b-c', { a: snap(1, 'running', 100), b: snap(2, 'running', 200), c: snap(3, 'exited', 290) }) };
      const wire = (s: ExecutionState) => Buffer.from(toBinary(ExecutionStateSchema, executionStateTo(s)));
      const onWire = (s: ExecutionState) => wire(s).equals(wire({ state: s.state, substate: s.substate, additionalInfo: s.additionalInfo } as ExecutionState));
      expectObservable(
        stateChecker(cache, asyncScheduler, 'Podman')(podmanReading('id1')).pipe(map((s) => [formatState(s), s.heardAt, s.exitCode, onWire(s)])),
      ).toBe('a---c', {
        a: ['Running(Ok)', 100, undefined, true],
        c: ["Failed(ExecFailed): Exit code: '2'", 290, 2, true],
      });
    });
  });
});

describe('the state checker in a burst of other containers', () => {
  /** Its container id1 in `state`, beside another's container id2 that runs. */
  const beside = (state: string, exitCode = 0) =>
    new Map([
      ['id1', { id: 'id1', state, exitCode }],
      ['id2', { id: 'id2', state: 'running' }],
    ]);

  // swdd~generic-state-checker-sends-workload-state~2
  it("reads only the snapshots that changed its container: another's news wakes no reading, a failure and the poll after it are read", () => {
    testScheduler().run(({ cold, expectObservable, flush }) => {
      const cache = {
        fresh: () =>
          cold('a-b-c-d-e-f', {
            a: { poll: 1, containers: beside('running') },
            b: { poll: 1, containers: beside('running'), changed: new Set(['id2']) },
            c: { poll: 2, error: 'gone' },
            d: { poll: 3, containers: beside('running'), changed: new Set<string>() },
            // Its container shown otherwise, but the snapshot says only id2 changed: not read.
            e: { poll: 3, containers: beside('exited', 4), changed: new Set(['id2']) },
            f: { poll: 3, containers: beside('exited', 4), changed: new Set(['id1']) },
          }),
      };
      let readings = 0;
      const reading = podmanReading('id1');
      const counted = (containers: Parameters<typeof reading>[0]) => {
        readings += 1;
        return reading(containers);
      };
      expectObservable(stateChecker(cache, asyncScheduler, 'Podman')(counted, ['id1']).pipe(map(shown))).toBe('a---c-d---f', {
        a: 'Running(Ok)',
        c: 'Failed(Unknown): Podman could not be asked for the container states: gone',
        d: 'Running(Ok)',
        f: "Failed(ExecFailed): Exit code: '4'",
      });
      flush();
      // a, d and f: a failure has no containers to read, b and e are passed over.
      expect(readings).to.equal(3);
    });
  });

  // swdd~generic-state-checker-sends-workload-state~2
  it('while a transient reading waits for its second, the next poll tells that it lasted, though it changed nothing', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const cache = {
        fresh: () =>
          cold('a-s 999ms o', {
            a: { poll: 1, containers: beside('running') },
            s: { poll: 2, containers: beside('stopped'), changed: new Set(['id1']) },
            o: { poll: 3, containers: beside('stopped'), changed: new Set<string>() },
          }),
      };
      expectObservable(stateChecker(cache, asyncScheduler, 'Podman')(podmanReading('id1'), ['id1']).pipe(map(shown))).toBe('a 1001ms o', {
        a: 'Running(Ok)',
        o: 'Stopping(Stopping): stopped',
      });
    });
  });
});
