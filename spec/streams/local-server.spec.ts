import { create } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { NEVER, Subject, map } from 'rxjs';
import { RequestSchema } from '../../proto/gen/ank_base_pb.js';
import { ExecutionState } from '../../lib/execution-state.js';
import { silentLogger } from '../../lib/logger.js';
import { parseManifest } from '../../lib/codec/manifest.js';
import { specsFor } from '../../lib/desired-state.js';
import type { FromServer, ToServer } from '../../lib/messages.js';
import { MAX_SUBSCRIPTIONS_PER_WORKLOAD, localServer } from '../../streams/local-server.js';
import { testScheduler } from '../helpers/virtual-time.js';

const manifest = (config: string, extra = '') =>
  parseManifest(`apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: ${config}"
  app:
    runtime: podman
    agent: agent_A
    dependencies: {db: ADD_COND_RUNNING}
    runtimeConfig: "image: app"
${extra}`);

const summary = (m: FromServer) => {
  if (m.kind === 'serverHello') return `hello ${m.added.map((s) => s.instanceName.workloadName).join(',')}`;
  if (m.kind === 'updateWorkload') {
    return `update +${m.added.map((s) => s.instanceName.workloadName).join(',')} -${m.deleted.map((d) => `${d.instanceName.workloadName}${JSON.stringify(d.dependencies)}`).join(',')}`;
  }
  return m.kind;
};

describe('the local server of standalone mode', () => {
  it('sends ServerHello for the first manifest and UpdateWorkload diffs (with implicit delete conditions) for the next ones', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const v1 = manifest('db:1');
      const v2 = manifest('db:2');
      const v3 = manifest('db:2', '  other:\n    runtime: podman\n    agent: agent_B\n');
      const out$ = localServer(cold('a-b-c-d', { a: v1, b: v1, c: v2, d: v3 }), NEVER, { agentName: 'agent_A', log: silentLogger });
      expectObservable(out$.pipe(map(summary))).toBe('a---c', {
        a: 'hello db,app',
        c: 'update +db -db{"app":"NotPendingNorRunning"}',
      });
    });
  });

  it("keeps the latest state of each of the agent's workload instances for the status view", () => {
    testScheduler().run(({ cold, flush }) => {
      const v1 = manifest('db:1');
      const seen: number[] = [];
      const db = { workloadName: 'db', agentName: 'agent_A', id: 'x' };
      localServer(
        cold('a', { a: v1 }),
        cold('-s-r', {
          s: { kind: 'updateWorkloadState', states: [{ instanceName: db, executionState: ExecutionState.running() }] },
          r: { kind: 'updateWorkloadState', states: [{ instanceName: db, executionState: ExecutionState.removed() }] },
        }),
        { agentName: 'agent_A', log: silentLogger, onSnapshot: (s) => seen.push(s.states.size) },
      ).subscribe();
      flush();
      expect(seen).to.deep.equal([0, 1, 0]);
    });
  });
});

describe('events in standalone mode (1.x)', () => {
  const subscribe = (requestId: string, ...fieldMask: string[]): ToServer => ({
    kind: 'request',
    request: create(RequestSchema, {
      requestId,
      RequestContent: { case: 'completeStateRequest', value: { fieldMask, subscribeForEvents: true } },
    }),
  });
  const cancel = (requestId: string): ToServer => ({
    kind: 'request',
    request: create(RequestSchema, { requestId, RequestContent: { case: 'eventsCancelRequest', value: {} } }),
  });
  /** `requestId: case [added] [updated] [removed]` of a response. */
  const event = (m: FromServer) => {
    if (m.kind !== 'response') return m.kind;
    const c = m.response.ResponseContent;
    const altered = c.case === 'completeStateResponse' ? c.value.alteredFields : undefined;
    // An SDK tells an event from an answer by the altered fields being there at all.
    if (c.case === 'completeStateResponse' && !altered) return `${m.response.requestId}: ${c.case} (answer)`;
    return `${m.response.requestId}: ${c.case} [${altered?.addedFields ?? ''}] [${altered?.updatedFields ?? ''}] [${altered?.removedFields ?? ''}]`;
  };

  it('a subscribed workload gets the state first, then an event for a manifest edit, for an execution state and for an UpdateStateRequest under its masks; none after cancelling', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const v1 = manifest('db:1');
      const v2 = manifest('db:1', '  extra:\n    runtime: podman\n    agent: agent_B\n');
      const app = specsFor('agent_A', v1).find((s) => s.instanceName.workloadName === 'app')!;
      const update: ToServer = {
        kind: 'request',
        request: create(RequestSchema, {
          requestId: 'app@u1',
          RequestContent: {
            case: 'updateStateRequest',
            value: {
              updateMask: ['desiredState.workloads.db.runtimeConfig'],
              newState: { desiredState: { workloads: { workloads: { db: { runtimeConfig: 'image: db:2' } } } } },
            },
          },
        }),
      };
      const out$ = localServer(
        cold('a---b', { a: v1, b: v2 }),
        cold('-s-r-c-u-----x-y', {
          s: subscribe('app@e1', 'desiredState.workloads', 'workloadStates'),
          r: { kind: 'updateWorkloadState', states: [{ instanceName: app.instanceName, executionState: ExecutionState.running() }] },
          c: { kind: 'updateWorkloadState', states: [{ instanceName: app.instanceName, executionState: ExecutionState.running() }] },
          u: update,
          x: cancel('app@e1'),
          y: { kind: 'updateWorkloadState', states: [{ instanceName: app.instanceName, executionState: ExecutionState.succeeded() }] },
        }),
        { agentName: 'agent_A', log: silentLogger },
      );
      const key = `workloadStates.agent_A.app.${app.instanceName.id}`;
      expectObservable(out$.pipe(map(event))).toBe('hs-re--(uvw)-x', {
        h: 'serverHello',
        s: 'app@e1: completeStateResponse (answer)',
        r: `app@e1: completeStateResponse [${key}] [] []`,
        e: 'app@e1: completeStateResponse [desiredState.workloads.extra] [] []',
        u: 'app@u1: UpdateStateSuccess [] [] []',
        v: 'updateWorkload',
        w: 'app@e1: completeStateResponse [] [desiredState.workloads.db.runtimeConfig] []',
        x: 'app@e1: eventsCancelAccepted [] [] []',
      });
    });
  });

  it('an event carries the masked state as it is now, and a state that changes nothing under the masks sends none', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const v1 = manifest('db:1');
      const db = specsFor('agent_A', v1).find((s) => s.instanceName.workloadName === 'db')!;
      const out$ = localServer(
        cold('a', { a: v1 }),
        cold('-s-r', {
          s: subscribe('app@e1', 'desiredState.workloads.app.agent'),
          r: { kind: 'updateWorkloadState', states: [{ instanceName: db.instanceName, executionState: ExecutionState.running() }] },
        }),
        { agentName: 'agent_A', log: silentLogger },
      );
      const agentOf = (m: FromServer) =>
        m.kind === 'response' && m.response.ResponseContent.case === 'completeStateResponse'
          ? m.response.ResponseContent.value.completeState?.desiredState?.workloads?.workloads.app.agent
          : m.kind;
      expectObservable(out$.pipe(map(agentOf))).toBe('hs', { h: 'serverHello', s: 'agent_A' });
    });
  });

  it('one workload holds at most MAX_SUBSCRIPTIONS_PER_WORKLOAD subscriptions: more get an error and nothing else; another workload and plain requests are answered as before', () => {
    const v1 = manifest('db:1');
    const v2 = manifest('db:2');
    const requests: ToServer[] = Array.from({ length: 2000 }, (_, i) => subscribe(`app@s${i}`, 'desiredState'));
    requests.push(subscribe('db@s0', 'desiredState'));
    requests.push({
      kind: 'request',
      request: create(RequestSchema, { requestId: 'app@plain', RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'] } } }),
    });
    const out: FromServer[] = [];
    const manifests = new Subject<ReturnType<typeof manifest>>();
    const outbound = new Subject<ToServer>();
    localServer(manifests, outbound, { agentName: 'agent_A', log: silentLogger }).subscribe((m) => out.push(m));
    manifests.next(v1);
    requests.forEach((r) => outbound.next(r));
    const responses = out.filter((m): m is Extract<FromServer, { kind: 'response' }> => m.kind === 'response').map((m) => m.response);
    const accepted = responses.filter((r) => r.ResponseContent.case === 'completeStateResponse');
    const refused = responses.filter((r) => r.ResponseContent.case === 'error');
    expect(accepted.map((r) => r.requestId)).to.deep.equal([
      ...Array.from({ length: MAX_SUBSCRIPTIONS_PER_WORKLOAD }, (_, i) => `app@s${i}`),
      'db@s0',
      'app@plain',
    ]);
    expect(refused).to.have.length(2000 - MAX_SUBSCRIPTIONS_PER_WORKLOAD);
    expect(refused[0].ResponseContent.value).to.deep.include({
      message: `At most ${MAX_SUBSCRIPTIONS_PER_WORKLOAD} event subscriptions per workload: cancel one first.`,
    });
    out.length = 0;
    manifests.next(v2);
    const events = out.filter((m) => m.kind === 'response').map((m) => (m as Extract<FromServer, { kind: 'response' }>).response.requestId);
    expect(events).to.have.length(MAX_SUBSCRIPTIONS_PER_WORKLOAD + 1);
  });
});
