import { create } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { CompleteStateSchema, RequestSchema } from '../../proto/gen/ank_base_pb.js';
import { completeStateTo, declaredStateFrom } from '../../lib/codec/wire.js';
import { applyUpdate as applyDomainUpdate, maskedState, pick } from '../../lib/complete-state.js';
import { ExecutionState } from '../../lib/execution-state.js';
import { parseManifest } from '../../lib/codec/manifest.js';
import { ManifestError, specsFor } from '../../lib/desired-state.js';
import type { FromServer } from '../../lib/messages.js';

// As the local server uses them: the state and the update cross the codec at the edge.
const completeState = (...args: Parameters<typeof maskedState>) => completeStateTo(maskedState(...args));
const applyUpdate = (desired: Parameters<typeof applyDomainUpdate>[0], newState: Parameters<typeof declaredStateFrom>[0], mask: readonly string[]) =>
  applyDomainUpdate(desired, declaredStateFrom(newState), mask);
import { localServerStep } from '../../streams/local-server.js';

const desired = parseManifest(`apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: agent_A
    restartPolicy: ALWAYS
    dependencies: {db: ADD_COND_RUNNING}
    runtimeConfig: "image: web"
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db"
configs:
  port: "80"
`);
const [db] = specsFor('agent_A', desired).filter((s) => s.instanceName.workloadName === 'db');
const dbRunning = { instanceName: db.instanceName, executionState: ExecutionState.running() };

describe('the complete state in standalone mode', () => {
  it('picks what the field masks name, `*` matching any key', () => {
    const tree = { a: { x: { n: 1, m: 2 }, y: { n: 3 } }, b: 4 };
    expect(pick(tree, ['a.*.n'])).to.deep.equal({ a: { x: { n: 1 }, y: { n: 3 } } });
    expect(pick(tree, ['b', 'a.y'])).to.deep.equal({ b: 4, a: { y: { n: 3 } } });
    expect(pick(tree, ['nothing.here'])).to.deep.equal({});
    expect(pick(tree, [])).to.equal(tree);
  });

  // swdd~api-object-serialization~1
  it("answers with the desired state (sorted), the agent's workload states and the agent, filtered by the field mask", () => {
    const all = completeState('agent_A', desired, [dbRunning], []);
    expect(Object.keys(all.desiredState!.workloads!.workloads)).to.deep.equal(['db', 'web']);
    expect(all.desiredState!.workloads!.workloads.web.restartPolicy).to.equal(2);
    expect(all.desiredState!.workloads!.workloads.web.dependencies!.dependencies).to.deep.equal({ db: 0 });
    expect(all.desiredState!.configs!.configs.port.ConfigItemEnum).to.deep.include({ case: 'String', value: '80' });
    expect(all.workloadStates!.agentStateMap.agent_A.wlNameStateMap.db.idStateMap[db.instanceName.id].ExecutionStateEnum).to.deep.include({ case: 'running' });
    expect(Object.keys(all.agents!.agents)).to.deep.equal(['agent_A']);
    const some = completeState('agent_A', desired, [dbRunning], ['desiredState.workloads.web.agent']);
    expect(Object.keys(some.desiredState!.workloads!.workloads)).to.deep.equal(['web']);
    expect(some.desiredState!.workloads!.workloads.web.agent).to.equal('agent_A');
    expect(some.desiredState!.workloads!.workloads.web.runtime).to.equal(undefined);
    expect(some.workloadStates).to.equal(undefined);
  });

  it('applies an update mask: adds, changes and deletes workloads; no mask replaces the desired state', () => {
    const newState = create(CompleteStateSchema, {
      desiredState: {
        workloads: {
          workloads: {
            cache: { agent: 'agent_A', runtime: 'podman', runtimeConfig: 'image: cache' },
            web: { agent: 'agent_A', runtime: 'podman', runtimeConfig: 'image: web:2' },
          },
        },
      },
    });
    const added = applyUpdate(desired, newState, ['desiredState.workloads.cache']);
    expect([...added.workloads.keys()].sort()).to.deep.equal(['cache', 'db', 'web']);
    const changed = applyUpdate(desired, newState, ['desiredState.workloads.web.runtimeConfig']);
    expect(changed.workloads.get('web')!.runtimeConfig).to.equal('image: web:2');
    expect(changed.workloads.get('web')!.restartPolicy, 'the rest of web stays').to.equal('Always');
    const deleted = applyUpdate(desired, newState, ['desiredState.workloads.db']);
    expect([...deleted.workloads.keys()]).to.deep.equal(['web']);
    expect([...applyUpdate(desired, newState, []).workloads.keys()].sort()).to.deep.equal(['cache', 'web']);
  });

  it('rejects an update that makes the desired state invalid', () => {
    const cyclic = create(CompleteStateSchema, {
      desiredState: {
        workloads: {
          workloads: {
            db: { agent: 'agent_A', runtime: 'podman', runtimeConfig: 'image: db', dependencies: { dependencies: { web: 0 } } },
          },
        },
      },
    });
    expect(() => applyUpdate(desired, cyclic, ['desiredState.workloads.db'])).to.throw(ManifestError, 'the dependencies form a cycle: db -> web -> db');
  });

  it("the local server answers a workload's UpdateStateRequest with UpdateStateSuccess and applies it", () => {
    const snapshot = { desired, states: new Map() };
    const request = create(RequestSchema, {
      requestId: 'web@u1',
      RequestContent: {
        case: 'updateStateRequest',
        value: {
          updateMask: ['desiredState.workloads.cache'],
          newState: { desiredState: { workloads: { workloads: { cache: { agent: 'agent_A', runtime: 'podman', runtimeConfig: 'image: cache' } } } } },
        },
      },
    });
    const step = localServerStep('agent_A', snapshot, { message: { kind: 'request', request } });
    const [answer, update] = step.out as [Extract<FromServer, { kind: 'response' }>, Extract<FromServer, { kind: 'updateWorkload' }>];
    const content = answer.response as {
      requestId: string;
      ResponseContent: { case: string; value: { addedWorkloads: string[]; deletedWorkloads: string[] } };
    };
    expect(content.requestId).to.equal('web@u1');
    expect(content.ResponseContent.case).to.equal('UpdateStateSuccess');
    expect(content.ResponseContent.value.addedWorkloads).to.have.length(1);
    expect(content.ResponseContent.value.addedWorkloads[0]).to.match(/^cache\.[0-9a-f]{64}\.agent_A$/);
    expect(update.added.map((s) => s.instanceName.workloadName)).to.deep.equal(['cache']);
    expect(step.snapshot.desired!.workloads.has('cache')).to.equal(true);
  });

  it('the local server answers an invalid update and a logs request with an error', () => {
    const snapshot = { desired, states: new Map() };
    const bad = create(RequestSchema, {
      requestId: 'w@1',
      RequestContent: {
        case: 'updateStateRequest',
        value: {
          updateMask: ['desiredState.workloads.x'],
          newState: { desiredState: { workloads: { workloads: { x: { agent: 'agent_A' } } } } },
        },
      },
    });
    const logs = create(RequestSchema, { requestId: 'w@2', RequestContent: { case: 'logsRequest', value: {} } });
    const errorOf = (r: typeof bad) => {
      const [out] = localServerStep('agent_A', snapshot, { message: { kind: 'request', request: r } }).out as Array<Extract<FromServer, { kind: 'response' }>>;
      return (out.response as unknown as { ResponseContent: { case: string; value: { message: string } } }).ResponseContent;
    };
    expect(errorOf(bad)).to.deep.include({ case: 'error' });
    expect(errorOf(bad).value.message).to.equal("The update is invalid: workload 'x': 'runtime' is missing");
    expect(errorOf(logs).value.message).to.equal("'logsRequest' requests are not available in standalone mode.");
  });
});
