// The released agent's behaviour on the wire: the real agent, real Podman and a loopback server, where a real server or a
// real workload can tell the agent's behaviour from the reference agent's.
import path from 'node:path';
import { expect } from 'chai';
import { executionStateTo } from '../../lib/codec/wire.js';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import { ExecutionState } from '../../lib/execution-state.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { type AgentStream, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { endToEnd } from '../helpers/end-to-end.js';
import { busybox, containerOf, podman } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';

const history = (stream: AgentStream, name: string, id?: string) =>
  reportedStates(stream)
    .filter(([n, i]) => n === name && (id === undefined || i === id))
    .map(([, , s]) => s);
const state = (workloadName: string, agentName: string, executionState: ExecutionState) => ({
  instanceName: { workloadName, agentName, id: `${workloadName}-id` },
  executionState: executionStateTo(executionState),
});

describe('ank-agent as the reference agent behaves (end to end)', function () {
  this.timeout(90_000);
  const e2e = endToEnd('ref');
  const { agentName } = e2e;

  // swdd~agent-handles-update-workload-state-requests~1, swdd~agent-manager-stores-all-workload-states~1
  it('the states a real server sends before its ServerHello (NotScheduled ones with no agent among them) count for the dependencies', async () => {
    const app = busybox('app', agentName, { dependencies: { db: 'Running' } });
    e2e.start();
    const stream = await e2e.server.nextStream();
    await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    stream.send({
      FromServerEnum: {
        case: 'updateWorkloadState',
        value: { workloadStates: [state('idle', '', ExecutionState.notScheduled()), state('db', 'agent_B', ExecutionState.running())] },
      },
    });
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(app)] } } });
    await until(() => history(stream, 'app').includes('Running(Ok)'), 'app to run');
    expect(history(stream, 'app')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
  });

  // swdd~workload-control-loop-restarts-workloads-using-update~1
  it('a restart by policy is reported as an update (Stopping(RequestedAtRuntime), Removed, Pending(Starting))', async () => {
    const flaky = busybox('flaky', agentName, { script: 'sleep 1; exit 1', restartPolicy: 'OnFailure' });
    e2e.start();
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(flaky)] } } });
    await until(() => history(stream, 'flaky').filter((s) => s === 'Running(Ok)').length >= 2, 'a restart');
    expect(history(stream, 'flaky').slice(0, 7)).to.deep.equal([
      'Pending(Starting): Triggered at runtime.',
      'Running(Ok)',
      "Failed(ExecFailed): Exit code: '1'",
      'Stopping(RequestedAtRuntime)',
      'Removed',
      'Pending(Starting): Triggered at runtime.',
      'Running(Ok)',
    ]);
  });

  // swdd~agent-skips-unknown-runtime~2
  it("an update of a workload of an unknown runtime removes the old instance's state; the new one is reported through its own operation", async () => {
    const v1 = workload('odd', { runtime: 'docker', agent: agentName, config: 'image: odd:1' });
    const v2 = workload('odd', { runtime: 'docker', agent: agentName, config: 'image: odd:2' });
    e2e.start();
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(v1)] } } });
    await until(() => history(stream, 'odd').length > 1, 'odd reported');
    stream.send({
      FromServerEnum: {
        case: 'updateWorkload',
        value: { addedWorkloads: [addedWorkload(v2)], deletedWorkloads: [{ instanceName: v1.instanceName, dependencies: {} }] },
      },
    });
    await until(() => history(stream, 'odd', v2.instanceName.id).length > 1 && history(stream, 'odd', v1.instanceName.id).length > 3, 'the update');
    expect(history(stream, 'odd', v1.instanceName.id)).to.deep.equal([
      'Pending(Starting): Triggered at runtime.',
      'Pending(StartingFailed): Unsupported Runtime',
      'Stopping(RequestedAtRuntime)',
      'Removed',
    ]);
    expect(history(stream, 'odd', v2.instanceName.id)).to.deep.equal([
      'Pending(Starting): Triggered at runtime.',
      'Pending(StartingFailed): Unsupported Runtime',
    ]);
  });

  // swdd~agent-existing-workloads-resume-existing~2, swdd~agent-existing-workloads-replace-updated~4
  it('after a restart of the agent, a running container is resumed, one that exited 0 is started again (waiting for its dependency untouched), one that exited 1 is replaced', async () => {
    const running = busybox('running', agentName);
    const done = busybox('done', agentName, { script: 'sleep 2; exit 0' });
    const waiting = busybox('waiting', agentName, { script: 'exit 0' });
    const failed = busybox('failed', agentName, { script: 'exit 1' });
    e2e.start();
    const first = await e2e.server.nextStream();
    first.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [running, done, waiting, failed].map(addedWorkload) } } });
    await until(
      () =>
        history(first, 'running').includes('Running(Ok)') &&
        history(first, 'done').includes('Succeeded(Ok)') &&
        history(first, 'waiting').includes('Succeeded(Ok)') &&
        history(first, 'failed').some((s) => s.startsWith('Failed')),
      'four settled workloads',
    );
    const ids = Object.fromEntries([running, done, waiting, failed].map((w) => [w.instanceName.workloadName, containerOf(w)]));
    e2e.agent!.kill('SIGKILL');
    await new Promise((r) => e2e.agent!.once('close', r));

    e2e.start();
    const second = await e2e.server.nextStream(10_000, 1);
    const waitingForGate = { ...waiting, dependencies: { gate: 'Running' as const } };
    second.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [running, done, waitingForGate, failed].map(addedWorkload) } } });
    await until(
      () =>
        history(second, 'done').includes('Succeeded(Ok)') &&
        history(second, 'failed').some((s) => s.startsWith('Failed')) &&
        history(second, 'waiting').length > 0 &&
        history(second, 'running').length > 0,
      'the second run to settle',
    );
    expect(history(second, 'running')).to.deep.equal(['Running(Ok)']);
    expect(containerOf(running)).to.equal(ids.running);
    expect(history(second, 'done')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)', 'Succeeded(Ok)']);
    expect(containerOf(done), 'the same container, started again').to.equal(ids.done);
    expect(history(second, 'waiting')).to.deep.equal(['Pending(WaitingToStart)']);
    expect(containerOf(waiting), 'untouched while it waits').to.equal(ids.waiting);
    expect(podman('inspect', ids.waiting, '--format={{.State.Status}}')).to.equal('exited');
    expect(history(second, 'failed').slice(0, 3)).to.deep.equal(['Stopping(RequestedAtRuntime)', 'Removed', 'Pending(Starting): Triggered at runtime.']);
    expect(containerOf(failed), 'a new container').not.to.equal(ids.failed);
  });

  it('a Control Interface request made while the server is away is kept and sent after the reconnect; AgentLoadStatus comes right after the hello', async () => {
    const ctl = {
      ...busybox('ctl', agentName),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['desiredState'] }], denyRules: [] },
    };
    e2e.start();
    const first = await e2e.server.nextStream();
    first.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(ctl)] } } });
    const load = await first.waitFor((m) => m.ToServerEnum.case === 'AgentLoadStatus', 1500);
    expect(load.ToServerEnum.case).to.equal('AgentLoadStatus');
    await until(() => history(first, 'ctl').includes('Running(Ok)'), 'ctl to run');
    const client = new ControlInterfaceClient(controlInterfaceFolder(path.join(e2e.run, `${agentName}_io`), ctl));
    try {
      client.hello();
      await client.next();
      e2e.server.stop();
      // Real time on a real connection: the agent sees the server gone, then the workload asks.
      await new Promise((r) => setTimeout(r, 500));
      client.askState('during-outage', 'desiredState');
      await new Promise((r) => setTimeout(r, 300));
      await e2e.server.listen();
      const second = await e2e.server.nextStream(10_000, 1);
      second.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(ctl)] } } });
      const asked = await second.waitFor((m) => m.ToServerEnum.case === 'request', 10_000);
      expect(asked.ToServerEnum.value).to.deep.include({ requestId: 'ctl@during-outage' });
    } finally {
      client.close();
    }
  });
});
