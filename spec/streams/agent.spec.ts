import { create, fromBinary } from '@bufbuild/protobuf';
import { EMPTY, NEVER, bufferTime, filter, map, of, asyncScheduler } from 'rxjs';
import { ResponseSchema } from '../../proto/gen/ank_base_pb.js';
import { LINE_1 } from '../../lib/codec/lines.js';
import { FromAnkaiosSchema } from '../../proto/gen/control_api_pb.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import { silentLogger } from '../../lib/logger.js';
import type { FromServer, ToServer } from '../../lib/messages.js';
import type { WorkloadFrame } from '../../lib/ports.js';
import { type AgentDeps, agent } from '../../streams/agent.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { AGENT, workload } from '../../scripts/harness/fixtures.js';
import { testScheduler } from '../helpers/virtual-time.js';

const S = ExecutionState;
const deps = (runtime: FakeRuntime): AgentDeps => ({
  agentName: AGENT,
  runtimes: new Map([['fake', runtime]]),
  scheduler: asyncScheduler,
  prepare: () => of({}),
  release: () => EMPTY,
  log: silentLogger,
});
const shown = (m: ToServer) =>
  m.kind === 'updateWorkloadState'
    ? m.states.map((s) => `${s.instanceName.workloadName}: ${formatState(s.executionState)}`).join(', ')
    : m.kind === 'request'
      ? `request ${m.request.requestId}`
      : m.kind;
const { frame } = ControlInterfaceClient;
const hello = frame({ ToAnkaiosEnum: { case: 'hello', value: { protocolVersion: LINE_1.version } } });
const readAll = frame({
  ToAnkaiosEnum: { case: 'request', value: { requestId: 'r1', RequestContent: { case: 'completeStateRequest', value: { fieldMask: [] } } } },
});
const readAccess = { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] };
/** A frame is a varint length (one byte for these small messages), then the message. */
const toWorkload = (f: WorkloadFrame) => `${f.workloadName}: ${fromBinary(FromAnkaiosSchema, f.bytes.subarray(1)).FromAnkaiosEnum.case}`;

describe('agent(sources, deps) → sinks', () => {
  // swdd~agent-shall-use-interfaces-to-server~1, swdd~agent-sends-workload-states-of-its-workloads-to-server~2
  it('a ServerHello becomes the states of the workload on toServer$; each new connection first hears the current states', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const app = workload('app');
      const runtime = new FakeRuntime({ states: () => cold('--r', { r: S.running() }) });
      const fromServer$ = cold<FromServer>('(ca) 5ms d c', {
        c: { kind: 'connected', lines: [LINE_1] },
        a: { kind: 'serverHello', added: [app] },
        d: { kind: 'disconnected' },
      });
      const sinks = agent({ fromServer$, controlInterfaces$: NEVER }, deps(runtime));
      expectObservable(sinks.toServer$.pipe(map(shown)), '^ 20ms !').toBe('a 1ms b 7ms c', {
        a: 'app: Pending(Starting): Triggered at runtime.',
        b: 'app: Running(Ok)',
        c: 'app: Running(Ok)',
      });
    });
  });

  // swdd~agent-forward-request-from-control-interface-pipe-to-server~2, swdd~agent-forward-responses-to-control-interface-pipe~1
  it('Control Interface frames become requests to the server; the response comes back as a frame to the workload', () => {
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const response: FromServer = {
        kind: 'response',
        response: create(ResponseSchema, { requestId: 'app@r1', ResponseContent: { case: 'completeStateResponse', value: {} } }),
      };
      const fromServer$ = hot<FromServer>('c--a', { c: { kind: 'connected', lines: [LINE_1] }, a: response });
      const pipes$ = cold('p', { p: { workloadName: 'app', access: readAccess, chunks$: cold('h-r', { h: hello, r: readAll }) } });
      const sinks = agent({ fromServer$, controlInterfaces$: pipes$ }, deps(new FakeRuntime()));
      expectObservable(sinks.toServer$.pipe(map(shown)), '^ 10ms !').toBe('--a', { a: 'request app@r1' });
      expectObservable(sinks.toWorkloads$.pipe(map(toWorkload)), '^ 10ms !').toBe('h--r', {
        h: 'app: controlInterfaceAccepted',
        r: 'app: response',
      });
    });
  });

  it('ends both sinks when the server link ends (after a stop)', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const sinks = agent(
        { fromServer$: cold<FromServer>('---|'), controlInterfaces$: NEVER },
        { ...deps(new FakeRuntime()), sampleMachine: () => ({ cpuBusy: 0, cpuTotal: 0, freeMemory: 0 }) },
      );
      expectObservable(sinks.toServer$).toBe('---|');
      expectObservable(sinks.toWorkloads$).toBe('---|');
    });
  });
});

describe("agent(): the Control Interface follows the server's protocol line", () => {
  it("accepts either line before a server accepted the agent; once one did, a session of the other line is closed with the reference's reason", () => {
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const hello08 = frame({ ToAnkaiosEnum: { case: 'hello', value: { protocolVersion: '0.8.0' } } });
      const fromServer$ = hot<FromServer>('--c', { c: { kind: 'connected', lines: [LINE_1] } });
      const pipes$ = cold('p', { p: { workloadName: 'app', access: readAccess, chunks$: cold('h', { h: hello08 }) } });
      const sinks = agent({ fromServer$, controlInterfaces$: pipes$ }, deps(new FakeRuntime()));
      const reason = (f: WorkloadFrame) => {
        const m = fromBinary(FromAnkaiosSchema, f.bytes.subarray(1)).FromAnkaiosEnum;
        return m.case === 'connectionClosed' ? m.value.reason : m.case;
      };
      expectObservable(sinks.toWorkloads$.pipe(map(reason)), '^ 10ms !').toBe('a-c', {
        a: 'controlInterfaceAccepted',
        c: "Unsupported protocol version '0.8.0'. Currently supported '1'",
      });
    });
  });
});

describe('agent(): while the server is away', () => {
  it('keeps Control Interface requests made during an outage and sends them after the reconnect; beyond 100 per workload an Error says the server is unreachable', () => {
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const request = (id: string) =>
        frame({
          ToAnkaiosEnum: {
            case: 'request',
            value: { requestId: id, RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'] } } },
          },
        });
      const many = Array.from({ length: 101 }, (_, i) => request(`r${i}`));
      const fromServer$ = hot<FromServer>('c-d----c', { c: { kind: 'connected', lines: [LINE_1] }, d: { kind: 'disconnected' } });
      const chunks$ = cold('h--(x)', { h: hello, x: Buffer.concat(many) });
      const sinks = agent({ fromServer$, controlInterfaces$: cold('p', { p: { workloadName: 'app', access: readAccess, chunks$ } }) }, deps(new FakeRuntime()));
      const requests = (m: ToServer[]) => (m.length === 0 ? 'none' : `${m.length} from ${(m[0] as { request: { requestId: string } }).request.requestId}`);
      expectObservable(
        sinks.toServer$.pipe(
          filter((m) => m.kind === 'request'),
          bufferTime(1),
          filter((b) => b.length > 0),
          map(requests),
        ),
        '^ 10ms !',
      ).toBe('-------a', { a: '100 from app@r0' });
      const refused = (f: WorkloadFrame) => {
        const m = fromBinary(FromAnkaiosSchema, f.bytes.subarray(1)).FromAnkaiosEnum;
        return m.case === 'response' && m.value.ResponseContent.case === 'error' ? `${m.value.requestId}: ${m.value.ResponseContent.value.message}` : m.case;
      };
      expectObservable(sinks.toWorkloads$.pipe(map(refused)), '^ 10ms !').toBe('h--x', {
        h: 'controlInterfaceAccepted',
        x: 'r100: The server is unreachable: the request was not sent.',
      });
    });
  });
});
