// The real agent process with real Podman, driven by a fake Ankaios server.
import { expect } from 'chai';
import { type AgentStream, FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { LINE_0_8 } from '../../lib/codec/lines.js';
import { instanceKey } from '../../lib/workload.js';
import { until } from '../../scripts/harness/wait.js';
import { endToEnd } from '../helpers/end-to-end.js';
import { busybox, containerOf, podman } from '../../scripts/harness/podman.js';

const reported = (stream: AgentStream, name: string, state: string, id?: string) =>
  reportedStates(stream).some(([n, i, s]) => n === name && s === state && (id === undefined || i === id));

describe('ank-agent with Podman and a server (end to end)', function () {
  this.timeout(120_000);
  const e2e = endToEnd('e2e');
  const { agentName } = e2e;

  // swdd~agent-functions-required-by-runtime-connector~1, swdd~agent-existing-workloads-resume-existing~2, swdd~agent-existing-workloads-replace-updated~4, swdd~agent-existing-workloads-delete-unneeded~2, swdd~agent-shall-use-interfaces-to-server~1, swdd~communication-to-from-agent-middleware~1
  it('after a restart the agent resumes unchanged containers, replaces changed ones and removes unneeded ones', async () => {
    const keep = busybox('keep', agentName);
    const changeV1 = busybox('change', agentName, { script: 'sleep 3600' });
    const changeV2 = busybox('change', agentName, { script: 'sleep 3601' });
    const unneeded = busybox('unneeded', agentName);

    e2e.start();
    const first = await e2e.server.nextStream();
    first.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [keep, changeV1, unneeded].map(addedWorkload) } } });
    await until(() => ['keep', 'change', 'unneeded'].every((n) => reported(first, n, 'Running(Ok)')), 'three running workloads');
    const keptContainer = containerOf(keep);
    e2e.agent!.kill('SIGKILL');
    await new Promise((r) => e2e.agent!.once('close', r));

    e2e.start();
    const second = await e2e.server.nextStream(10_000, 1);
    second.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [keep, changeV2].map(addedWorkload) } } });
    await until(
      () => reported(second, 'unneeded', 'Removed') && reported(second, 'change', 'Running(Ok)', changeV2.instanceName.id),
      'the replacement and the removal',
    );
    await until(() => reported(second, 'keep', 'Running(Ok)'), 'keep to be resumed');

    expect(containerOf(keep), 'the same container').to.equal(keptContainer);
    expect(
      reportedStates(second)
        .filter(([n]) => n === 'keep')
        .map(([, , s]) => s),
    ).to.deep.equal(['Running(Ok)']);
    expect(containerOf(changeV1)).to.equal('');
    expect(containerOf(unneeded)).to.equal('');
    expect(containerOf(changeV2)).not.to.equal('');
    expect(reported(second, 'change', 'Removed', changeV1.instanceName.id)).to.equal(true);
  });

  // swdd~agent-handles-workloads-with-fulfilled-dependencies~1
  it("a dependency on another agent's workload is released by the server's UpdateWorkloadState", async () => {
    const app = busybox('app', agentName, { dependencies: { db: 'Running' } });
    e2e.start();
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(app)] } } });
    await until(() => reported(stream, 'app', 'Pending(WaitingToStart)'), 'app waiting');
    stream.send({
      FromServerEnum: {
        case: 'updateWorkloadState',
        value: {
          workloadStates: [
            { instanceName: { workloadName: 'db', agentName: 'agent_B', id: 'x' }, executionState: { ExecutionStateEnum: { case: 'running', value: 0 } } },
          ],
        },
      },
    });
    await until(() => reported(stream, 'app', 'Running(Ok)'), 'app running');
    expect(
      reportedStates(stream)
        .filter(([n]) => n === 'app')
        .map(([, , s]) => s),
    ).to.deep.equal(['Pending(WaitingToStart)', 'Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
  });

  // swdd~podman-create-workload-mounts-fifo-files~1, swdd~agent-forward-responses-to-control-interface-pipe~1, swdd~agent-ensures-control-interface-input-pipe-read~1
  it('a container talks to the server through the pipes mounted at /run/ankaios/control_interface', async () => {
    // Hello{0.8.0}, then Request{r1, CompleteStateRequest{fieldMask: desiredState}}, length-delimited, in octal.
    const hello = String.raw`\011\012\007\022\0050.8.0`;
    const request = String.raw`\026\032\024\012\002r1\032\016\012\014desiredState`;
    const script = `cd /run/ankaios/control_interface && printf '${hello}${request}' > output && head -c 12 input | od -An -tx1`;
    const talker = busybox('talker', agentName, { script });
    const withAccess = {
      ...talker,
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['desiredState'] }], denyRules: [] },
    };
    // The talker says 0.8.0: a 0.8 server, with which the agent speaks the 0.8 line.
    e2e.server.stop();
    e2e.server = await FakeAnkaiosServer.start({ line: LINE_0_8 });
    e2e.start();
    const stream = await e2e.server.nextStream(10_000, 1);
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(withAccess)] } } });
    const asked = await stream.waitFor((m) => m.ToServerEnum.case === 'request', 20_000);
    const forwarded = asked.ToServerEnum.value as { requestId: string; RequestContent: { case: string } };
    expect(forwarded.requestId).to.equal('talker@r1');
    expect(forwarded.RequestContent.case).to.equal('completeStateRequest');
    stream.send({ FromServerEnum: { case: 'response', value: { requestId: 'talker@r1', ResponseContent: { case: 'completeStateResponse', value: {} } } } });
    await until(() => reported(stream, 'talker', 'Succeeded(Ok)'), 'the talker to finish');
    // ControlInterfaceAccepted (02 22 00), then Response{r1, CompleteState{}} (08 1a 06 0a 02 72 31 22 00)
    expect(podman('logs', instanceKey(talker.instanceName)).replace(/\s+/g, ' ').trim()).to.equal('02 22 00 08 1a 06 0a 02 72 31 22 00');
  });

  it("answers a LogsRequest from the server with the workload's lines and a LogsStopResponse", async () => {
    const chatty = busybox('chatty', agentName, { script: 'echo first; echo second; sleep 3600' });
    e2e.start();
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(chatty)] } } });
    await until(() => reported(stream, 'chatty', 'Running(Ok)'), 'chatty to run');
    await new Promise((r) => setTimeout(r, 300));
    stream.send({
      FromServerEnum: { case: 'logsRequest', value: { requestId: 'cli@logs1', logsRequest: { workloadNames: [chatty.instanceName], tail: -1 } } },
    });
    const stop = await stream.waitFor((m) => m.ToServerEnum.case === 'logsStopResponse', 20_000);
    expect(stop.ToServerEnum.value).to.deep.include({ requestId: 'cli@logs1' });
    const lines = stream.received.flatMap((m) =>
      m.ToServerEnum.case === 'logEntriesResponse' ? (m.ToServerEnum.value.logEntriesResponse?.logEntries ?? []) : [],
    );
    expect(lines.map((e) => e.message)).to.deep.equal(['first', 'second']);
    expect(lines[0].workloadName?.workloadName).to.equal('chatty');
  });
});
