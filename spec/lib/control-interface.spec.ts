// The rules of the Control Interfaces, step by step on the pure reducer.
import { create, toBinary } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { ResponseSchema } from '../../proto/gen/ank_base_pb.js';
import { ToAnkaiosSchema } from '../../proto/gen/control_api_pb.js';
import { LINE_0_8, LINE_1, PROTOCOL_LINES } from '../../lib/codec/lines.js';
import type { ProtocolLine } from '../../lib/version.js';
import {
  ACCESS_DENIED,
  type ControlInterfaceEffect,
  type ControlInterfaceInput,
  type ControlInterfacesState,
  INITIAL_HELLO_MISSING,
  MAX_HELD_REQUESTS,
  NO_CONTROL_INTERFACES,
  SERVER_UNREACHABLE,
  UNDECODABLE,
  stepControlInterfaces,
} from '../../lib/control-interface/session.js';
import type { Frame } from '../../lib/ports.js';
import type { ControlInterfaceAccess } from '../../lib/workload.js';

type ToAnkaiosInit = Parameters<typeof create<typeof ToAnkaiosSchema>>[1];
type RequestContent = NonNullable<Extract<NonNullable<ToAnkaiosInit>['ToAnkaiosEnum'], { case: 'request' }>['value']>['RequestContent'];

const READ_ALL: ControlInterfaceAccess = { allowRules: [{ kind: 'state', operation: 'Read', filterMasks: ['*'] }], denyRules: [] };
const frame = (message: ToAnkaiosInit): Frame => ({ kind: 'frame', bytes: toBinary(ToAnkaiosSchema, create(ToAnkaiosSchema, message)) });
const hello = (version = LINE_1.version): Frame => frame({ ToAnkaiosEnum: { case: 'hello', value: { protocolVersion: version } } });
const request = (requestId: string, content: RequestContent): Frame =>
  frame({ ToAnkaiosEnum: { case: 'request', value: { requestId, RequestContent: content } } });
const read = (requestId: string, ...fieldMask: string[]) => request(requestId, { case: 'completeStateRequest', value: { fieldMask } });
const subscribe = (requestId: string) => request(requestId, { case: 'completeStateRequest', value: { fieldMask: [], subscribeForEvents: true } });
const cancelEvents = (requestId: string) => request(requestId, { case: 'eventsCancelRequest', value: {} });
const online = (lines: readonly ProtocolLine[] = [LINE_1]): ControlInterfaceInput => ({ kind: 'connection', connection: { online: true, lines } });
const offline = (lines: readonly ProtocolLine[] = [LINE_1]): ControlInterfaceInput => ({ kind: 'connection', connection: { online: false, lines } });
const opened = (workloadName: string, pipe = 1, access = READ_ALL): ControlInterfaceInput => ({ kind: 'opened', pipe, workloadName, access });
const from = (workloadName: string, f: Frame, pipe = 1): ControlInterfaceInput => ({ kind: 'frame', pipe, workloadName, frame: f });
const response = (
  requestId: string,
  content: 'completeState' | 'logEntries' | 'eventsCancelAccepted' | 'logsCancelAccepted' = 'completeState',
): ControlInterfaceInput => ({
  kind: 'response',
  response: create(ResponseSchema, {
    requestId,
    ResponseContent:
      content === 'completeState'
        ? { case: 'completeStateResponse', value: {} }
        : content === 'logEntries'
          ? { case: 'logEntriesResponse', value: {} }
          : { case: content, value: {} },
  }),
});

/** Feeds the inputs in turn; what each said, in a readable form, and the last state. */
function run(...inputs: ControlInterfaceInput[]): { said: string[][]; state: ControlInterfacesState } {
  let state = NO_CONTROL_INTERFACES;
  const said: string[][] = [];
  for (const input of inputs) {
    const step = stepControlInterfaces(state, input);
    state = step.state;
    said.push(step.effects.filter((e) => e.kind === 'toServer' || e.kind === 'toWorkload').map(show));
  }
  return { said, state };
}

function show(effect: ControlInterfaceEffect): string {
  if (effect.kind === 'toServer') return `server ${effect.request.RequestContent.case} ${effect.request.requestId}`;
  if (effect.kind !== 'toWorkload') return effect.kind;
  const m = effect.message.FromAnkaiosEnum;
  const what =
    m.case === 'connectionClosed'
      ? `closed: ${m.value.reason}`
      : m.case === 'response'
        ? `${m.value.ResponseContent.case === 'error' ? `error ${m.value.ResponseContent.value.message}` : m.value.ResponseContent.case} ${m.value.requestId}`
        : m.case;
  return `${effect.workloadName} ← ${what} (${effect.line.name})${effect.logStream ? ` [log stream ${effect.logStream}]` : ''}`;
}

describe('the Control Interface rules (lib/control-interface/session.ts)', () => {
  describe('Hello and protocol versions', () => {
    // swdd~agent-converts-control-interface-message-to-ankaios-object~1
    it('accepts a Hello of a line the server speaks and answers in that line', () => {
      expect(run(online(), opened('app'), from('app', hello('1.0.0'))).said[2]).to.deep.equal(['app ← controlInterfaceAccepted (1)']);
      expect(run(online([LINE_0_8]), opened('app'), from('app', hello('0.8.1'))).said[2]).to.deep.equal(['app ← controlInterfaceAccepted (0.8)']);
    });

    it('closes on a Hello of a line the server does not speak, naming the lines it does', () => {
      expect(run(online([LINE_1]), opened('app'), from('app', hello('0.8.0'))).said[2]).to.deep.equal([
        "app ← closed: Unsupported protocol version '0.8.0'. Currently supported '1' (1)",
      ]);
      expect(run(offline(PROTOCOL_LINES), opened('app'), from('app', hello('2.0.0'))).said[2]).to.deep.equal([
        "app ← closed: Unsupported protocol version '2.0.0'. Currently supported '1', '0.8' (1)",
      ]);
    });

    // swdd~agent-listens-for-requests-from-pipe~1
    it('closes a session whose first message is not a Hello, or does not decode; a new Hello starts it again', () => {
      const { said } = run(
        online(),
        opened('app'),
        from('app', read('r1', 'desiredState')),
        from('app', read('r2')),
        from('app', hello()),
        from('app', read('r3')),
      );
      expect(said.slice(2)).to.deep.equal([
        [`app ← closed: ${INITIAL_HELLO_MISSING} (1)`],
        [],
        ['app ← controlInterfaceAccepted (1)'],
        ['server completeStateRequest app@r3'],
      ]);
      expect(run(online(), opened('app'), from('app', { kind: 'frame', bytes: new Uint8Array([0xff, 0xff]) })).said[2]).to.deep.equal([
        `app ← closed: ${UNDECODABLE} (1)`,
      ]);
    });

    it('after a Hello, skips a frame that does not decode and one too large, and goes on; garbage closes', () => {
      const { said } = run(
        online(),
        opened('app'),
        from('app', hello()),
        from('app', { kind: 'frame', bytes: new Uint8Array([0xff, 0xff]) }),
        from('app', { kind: 'oversized', size: 5 << 20 }),
        from('app', read('r1')),
        from('app', { kind: 'garbage', reason: 'a bad length' }),
      );
      expect(said.slice(3)).to.deep.equal([[], [], ['server completeStateRequest app@r1'], [`app ← closed: ${UNDECODABLE} (1)`]]);
    });

    it("closes an open session when the server's line changes to one it does not speak", () => {
      const { said } = run(online(PROTOCOL_LINES), opened('app'), from('app', hello('0.8.0')), online([LINE_1]));
      expect(said[3]).to.deep.equal(["app ← closed: Unsupported protocol version '0.8.0'. Currently supported '1' (0.8)"]);
    });
  });

  describe('requests', () => {
    // swdd~agent-adds-workload-prefix-id-control-interface-request~1, swdd~agent-forward-request-from-control-interface-pipe-to-server~2
    it('forwards an allowed request with the workload name in front of its id', () => {
      expect(run(online(), opened('app'), from('app', hello()), from('app', read('r1', 'desiredState'))).said[3]).to.deep.equal([
        'server completeStateRequest app@r1',
      ]);
    });

    // swdd~agent-checks-request-for-authorization~1
    it('answers a denied request and an empty one with "Access denied", sending nothing', () => {
      const access: ControlInterfaceAccess = { allowRules: [{ kind: 'state', operation: 'Read', filterMasks: ['desiredState'] }], denyRules: [] };
      const { said } = run(
        online(),
        opened('app', 1, access),
        from('app', hello()),
        from('app', read('r1', 'agents')),
        from('app', read('r2')),
        from('app', request('r3', { case: undefined })),
      );
      expect(said.slice(3)).to.deep.equal([
        [`app ← error ${ACCESS_DENIED} r1 (1)`],
        [`app ← error ${ACCESS_DENIED} r2 (1)`],
        [`app ← error ${ACCESS_DENIED} r3 (1)`],
      ]);
    });

    it('tells each decision for the metrics: allowed or denied, by workload', () => {
      const access: ControlInterfaceAccess = { allowRules: [{ kind: 'state', operation: 'Read', filterMasks: ['desiredState'] }], denyRules: [] };
      const decisions: string[] = [];
      let state = NO_CONTROL_INTERFACES;
      for (const input of [
        online(),
        opened('app', 1, access),
        from('app', hello()),
        from('app', read('r1', 'desiredState')),
        from('app', read('r2', 'agents')),
      ]) {
        const step = stepControlInterfaces(state, input);
        state = step.state;
        for (const e of step.effects) if (e.kind === 'authorized') decisions.push(`${e.workloadName} ${e.allowed ? 'allowed' : 'denied'}`);
      }
      expect(decisions).to.deep.equal(['app allowed', 'app denied']);
    });

    it('on the 0.8 line, answers an events cancel itself and refuses a subscription: nothing of events reaches a 0.8 server', () => {
      const { said } = run(online([LINE_0_8]), opened('app'), from('app', hello('0.8.0')), from('app', subscribe('s1')), from('app', cancelEvents('s1')));
      expect(said.slice(3)).to.deep.equal([['app ← error Events are not available on the 0.8 line. s1 (0.8)'], ['app ← eventsCancelAccepted s1 (0.8)']]);
    });
  });

  describe('while the server is away', () => {
    it('holds requests, at most 100 per workload, and sends them in order when the server is back', () => {
      const asks = Array.from({ length: MAX_HELD_REQUESTS + 1 }, (_, i) => from('app', read(`r${i}`, 'desiredState')));
      const { said } = run(offline(), opened('app'), from('app', hello()), ...asks, online());
      expect(said.slice(3, 3 + MAX_HELD_REQUESTS).flat()).to.deep.equal([]);
      expect(said[3 + MAX_HELD_REQUESTS]).to.deep.equal([`app ← error ${SERVER_UNREACHABLE} r${MAX_HELD_REQUESTS} (1)`]);
      expect(said.at(-1)).to.deep.equal(Array.from({ length: MAX_HELD_REQUESTS }, (_, i) => `server completeStateRequest app@r${i}`));
    });

    it("counts each workload's held requests on its own", () => {
      const asks = Array.from({ length: MAX_HELD_REQUESTS }, (_, i) => from('a', read(`r${i}`, 'desiredState')));
      const { said } = run(
        offline(),
        opened('a'),
        opened('b', 2),
        from('a', hello()),
        from('b', hello(), 2),
        ...asks,
        from('b', read('x', 'desiredState'), 2),
        online(),
      );
      expect(said.at(-1)).to.have.length(MAX_HELD_REQUESTS + 1);
      expect(said.at(-1)!.at(-1)).to.equal('server completeStateRequest b@x');
    });
  });

  describe('event subscriptions', () => {
    it('a new Hello ends the subscriptions of the session before it, at the server, and what the server still says of them goes nowhere', () => {
      const { said } = run(
        online(),
        opened('app'),
        from('app', hello()),
        from('app', subscribe('s1')),
        from('app', hello()),
        response('app@s1'),
        response('app@s1', 'eventsCancelAccepted'),
        response('app@s1'),
      );
      expect(said.slice(3)).to.deep.equal([
        ['server completeStateRequest app@s1'],
        ['app ← controlInterfaceAccepted (1)', 'server eventsCancelRequest app@s1'],
        [],
        [],
        // The cancel was confirmed: the id is free again and a response for it is routed.
        ['app ← completeStateResponse s1 (1)'],
      ]);
    });

    it('a cancel by the workload ends a subscription, which a later new Hello then does not cancel again', () => {
      const { said } = run(online(), opened('app'), from('app', hello()), from('app', subscribe('s1')), from('app', cancelEvents('s1')), from('app', hello()));
      expect(said.slice(4)).to.deep.equal([['server eventsCancelRequest app@s1'], ['app ← controlInterfaceAccepted (1)']]);
    });

    // swdd~agent-handles-control-interface-workload-gone~1
    it("the pipe gone (or opened anew) ends its session's subscriptions at the server; a close of an older pipe changes nothing", () => {
      const { said } = run(
        online(),
        opened('app', 1),
        from('app', hello(), 1),
        from('app', subscribe('s1'), 1),
        opened('app', 2),
        { kind: 'closed', pipe: 1, workloadName: 'app' },
        from('app', hello(), 2),
        from('app', subscribe('s2'), 2),
        { kind: 'closed', pipe: 1, workloadName: 'app' },
        { kind: 'closed', pipe: 2, workloadName: 'app' },
      );
      expect(said.slice(4)).to.deep.equal([
        ['server eventsCancelRequest app@s1'],
        [],
        ['app ← controlInterfaceAccepted (1)'],
        ['server completeStateRequest app@s2'],
        [],
        ['server eventsCancelRequest app@s2'],
      ]);
    });

    it('a subscription cancelled while the server is away is held like any request', () => {
      const { said } = run(online(), opened('app'), from('app', hello()), from('app', subscribe('s1')), offline(), from('app', hello()), online());
      expect(said.slice(5)).to.deep.equal([['app ← controlInterfaceAccepted (1)'], ['server eventsCancelRequest app@s1']]);
    });
  });

  describe('responses', () => {
    // swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1, swdd~agent-remove-id-prefix-forwarding-control-interface-response~1
    it('go to the workload named before the @, without the prefix, in the line its session speaks', () => {
      const { said } = run(
        online(PROTOCOL_LINES),
        opened('a'),
        opened('b', 2),
        from('a', hello()),
        from('b', hello('0.8.0'), 2),
        response('a@r1'),
        response('b@x@y'),
      );
      expect(said.slice(5)).to.deep.equal([['a ← completeStateResponse r1 (1)'], ['b ← completeStateResponse x@y (0.8)']]);
    });

    it('for a workload without an open session are dropped; a log response then cancels its stream at the server, once', () => {
      const { said } = run(
        online(),
        opened('app'),
        response('app@r1'),
        response('ghost@l1', 'logEntries'),
        response('ghost@l1', 'logEntries'),
        response('noprefix'),
      );
      expect(said.slice(2)).to.deep.equal([[], ['server logsCancelRequest ghost@l1'], [], []]);
    });

    // swdd~agent-handles-control-interface-full-output-pipe-buffer~1, swdd~agent-handles-control-interface-output-pipe-closed~1
    it('a log response the workload did not take cancels its stream once, and the rest of it goes nowhere', () => {
      const { said } = run(
        online(),
        opened('app'),
        from('app', hello()),
        response('app@l1', 'logEntries'),
        { kind: 'undelivered', logStream: 'app@l1' },
        { kind: 'undelivered', logStream: 'app@l1' },
        response('app@l1', 'logEntries'),
        response('app@l1', 'logsCancelAccepted'),
      );
      expect(said.slice(3)).to.deep.equal([['app ← logEntriesResponse l1 (1) [log stream app@l1]'], ['server logsCancelRequest app@l1'], [], [], []]);
    });
  });
});
