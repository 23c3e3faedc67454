// The real agent on both protocol lines: a Control Interface client on the host talks through the
// agent to a loopback server of the 1.x line (events) and of the 0.8 line (no events reach it).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { type UnknownField, create, toBinary } from '@bufbuild/protobuf';
import { WireType } from '@bufbuild/protobuf/wire';
import { expect } from 'chai';
import { RequestSchema, type Response, ResponseSchema } from '../../proto/gen/ank_base_pb.js';
import { LINE_0_8, LINE_1 } from '../../lib/codec/lines.js';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { type AgentStream, FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { endToEnd } from '../helpers/end-to-end.js';
import { IMAGE, busybox, podman, spec } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';

/** A length-delimited field the agent's protos do not have. */
const unknownText = (no: number, text: string): UnknownField => ({
  no,
  wireType: WireType.LengthDelimited,
  data: Uint8Array.of(text.length, ...Buffer.from(text)),
});
const requests = (stream: AgentStream) => stream.received.flatMap((m) => (m.ToServerEnum.case === 'request' ? [m.ToServerEnum.value] : []));
const contentOf = (m: ControlInterfaceClient['received'][number]) => {
  const r = m.FromAnkaiosEnum.case === 'response' ? m.FromAnkaiosEnum.value : undefined;
  return r && { requestId: r.requestId, case: r.ResponseContent.case, value: r.ResponseContent.value };
};

describe('ank-agent on the 1.x and the 0.8 protocol line (end to end)', function () {
  this.timeout(60_000);
  const e2e = endToEnd('lines');
  const { agentName } = e2e;
  let client: ControlInterfaceClient | undefined;
  afterEach(() => {
    client?.close();
    client = undefined;
  });

  /** The agent with a sleeping workload that may read the desired state through its Control Interface. */
  async function agentWithWatcher(line: typeof LINE_1, clientLine = line): Promise<{ stream: AgentStream; watcher: WorkloadSpec }> {
    e2e.server.stop();
    e2e.server = await FakeAnkaiosServer.start({ line });
    e2e.start({ args: ['-t', 'zone=a'], stderr: Boolean(process.env.AGENT_LOG) });
    const watcher = {
      ...busybox('watcher', agentName),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['desiredState'] }], denyRules: [] },
    };
    const stream = await e2e.server.nextStream(10_000, line === LINE_1 ? 0 : 1);
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(watcher)] } } });
    await until(() => reportedStates(stream).some(([n, , s]) => n === 'watcher' && s === 'Running(Ok)'), 'the watcher to run');
    client = new ControlInterfaceClient(controlInterfaceFolder(path.join(e2e.run, `${agentName}_io`), watcher), { line: clientLine });
    return { stream, watcher };
  }

  it('1.x: a client of Hello 1.0.0 subscribes to events, receives every response for its request in order, and cancels', async () => {
    const { stream } = await agentWithWatcher(LINE_1);
    expect(stream.received[0].ToServerEnum.value).to.deep.include({ protocolVersion: '1.0.1' });
    expect((stream.received[0].ToServerEnum.value as { tags?: { tags: object } }).tags?.tags).to.deep.equal({ zone: 'a' });
    client!.hello('1.0.0');
    expect((await client!.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
    client!.send({
      ToAnkaiosEnum: {
        case: 'request',
        value: { requestId: 'e1', RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'], subscribeForEvents: true } } },
      },
    });
    await until(() => requests(stream).length === 1, 'the subscription at the server');
    expect(requests(stream)[0].requestId).to.equal('watcher@e1');
    expect(requests(stream)[0].RequestContent.value).to.deep.include({ fieldMask: ['desiredState'], subscribeForEvents: true });
    for (const added of ['first', 'second', 'third']) {
      stream.send({
        FromServerEnum: {
          case: 'response',
          value: { requestId: 'watcher@e1', ResponseContent: { case: 'completeStateResponse', value: { alteredFields: { addedFields: [added] } } } },
        },
      });
    }
    const events = [await client!.next(), await client!.next(), await client!.next()].map(contentOf);
    expect(
      events.map((e) => [e?.requestId, e?.case, (e?.value as { alteredFields?: { addedFields: string[] } } | undefined)?.alteredFields?.addedFields]),
    ).to.deep.equal([
      ['e1', 'completeStateResponse', ['first']],
      ['e1', 'completeStateResponse', ['second']],
      ['e1', 'completeStateResponse', ['third']],
    ]);
    client!.send({ ToAnkaiosEnum: { case: 'request', value: { requestId: 'e1', RequestContent: { case: 'eventsCancelRequest', value: {} } } } });
    await until(() => requests(stream).length === 2, 'the cancel at the server');
    expect(requests(stream)[1]).to.deep.include({ requestId: 'watcher@e1' });
    expect(requests(stream)[1].RequestContent.case).to.equal('eventsCancelRequest');
    stream.send({ FromServerEnum: { case: 'response', value: { requestId: 'watcher@e1', ResponseContent: { case: 'eventsCancelAccepted', value: {} } } } });
    expect(contentOf(await client!.next())).to.deep.include({ requestId: 'e1', case: 'eventsCancelAccepted' });
  });

  it('1.x: fields the agent does not know pass through it byte for byte, in requests and in responses', async () => {
    const { stream } = await agentWithWatcher(LINE_1);
    client!.hello('1.0.1');
    expect((await client!.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
    // A newer SDK: a signature on the request and a new field of its CompleteStateRequest.
    const sent = create(RequestSchema, { requestId: 'u1', RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'] } } });
    sent.$unknown = [unknownText(20, 'signature')];
    (sent.RequestContent.value as { $unknown?: UnknownField[] }).$unknown = [unknownText(9, 'newer')];
    client!.send({ ToAnkaiosEnum: { case: 'request', value: sent } });
    await until(() => requests(stream).length === 1, 'the request at the server');
    expect(toBinary(RequestSchema, requests(stream)[0])).to.deep.equal(toBinary(RequestSchema, { ...sent, requestId: 'watcher@u1' }));
    // A newer server: the CompleteState's effectiveState (field 4) and a signature on the response.
    const answer = create(ResponseSchema, { requestId: 'watcher@u1', ResponseContent: { case: 'completeStateResponse', value: { completeState: {} } } });
    answer.$unknown = [unknownText(20, 'server signature')];
    const completeState = (answer.ResponseContent.value as { completeState: { $unknown?: UnknownField[] } }).completeState;
    completeState.$unknown = [unknownText(4, 'effective')];
    stream.send({ FromServerEnum: { case: 'response', value: answer } });
    const received = await client!.next();
    expect(received.FromAnkaiosEnum.case).to.equal('response');
    expect(toBinary(ResponseSchema, received.FromAnkaiosEnum.value as Response)).to.deep.equal(toBinary(ResponseSchema, { ...answer, requestId: 'u1' }));
  });

  it('0.8: events and empty requests are refused at the agent and nothing of them reaches the server; a 1.x Hello is closed', async () => {
    const { stream } = await agentWithWatcher(LINE_0_8);
    expect(stream.received[0].ToServerEnum.value).to.deep.include({ protocolVersion: '0.8.0' });
    expect((stream.received[0].ToServerEnum.value as { tags?: object }).tags, 'no tags on 0.8').to.equal(undefined);
    client!.hello('1.0.0');
    expect((await client!.next()).FromAnkaiosEnum.value).to.deep.include({ reason: "Unsupported protocol version '1.0.0'. Currently supported '0.8'" });
    client!.hello('0.8.0');
    expect((await client!.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
    client!.send({
      ToAnkaiosEnum: {
        case: 'request',
        value: { requestId: 'e1', RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'], subscribeForEvents: true } } },
      },
    });
    client!.send({ ToAnkaiosEnum: { case: 'request', value: { requestId: 'empty' } } });
    client!.send({ ToAnkaiosEnum: { case: 'request', value: { requestId: 'c1', RequestContent: { case: 'eventsCancelRequest', value: {} } } } });
    client!.send({
      ToAnkaiosEnum: {
        case: 'request',
        value: { requestId: 'plain', RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'] } } },
      },
    });
    const answers = [await client!.next(), await client!.next(), await client!.next()].map(contentOf);
    expect(answers.map((a) => [a?.requestId, a?.case])).to.deep.equal([
      ['e1', 'error'],
      ['empty', 'error'],
      ['c1', 'eventsCancelAccepted'],
    ]);
    expect((answers[0]?.value as { message: string } | undefined)?.message).to.equal('Events are not available on the 0.8 line.');
    await until(() => requests(stream).length > 0, 'the plain request at the server');
    expect(
      requests(stream).map((r) => r.requestId),
      'only the plain request, after the refused ones',
    ).to.deep.equal(['watcher@plain']);
    stream.send({ FromServerEnum: { case: 'response', value: { requestId: 'watcher@plain', ResponseContent: { case: 'completeStateResponse', value: {} } } } });
    expect(contentOf(await client!.next())).to.deep.include({ requestId: 'plain', case: 'completeStateResponse' });
  });
});

describe('podman-kube: the Control Interface mounted into the target container (end to end)', function () {
  this.timeout(90_000);
  const e2e = endToEnd('kubeci');
  const { agentName } = e2e;
  const podName = (suffix: string) => `${agentName}-${suffix}`.replace(/_/g, '-');
  beforeEach(() => e2e.start());

  // Hello{1.0.1}, then Request{r1, CompleteStateRequest{fieldMask: desiredState}}, length-delimited, in octal.
  const talk = String.raw`cd /run/ankaios/control_interface && printf '\011\012\007\022\0051.0.1\026\032\024\012\002r1\032\016\012\014desiredState' > output && head -c 12 input | od -An -tx1`;
  const container = (name: string) =>
    `      - name: ${name}\n        image: ${IMAGE}\n        command: ["/bin/sh", "-c", ${JSON.stringify(name === 'talker' ? talk : 'true')}]\n`;
  const pod = (name: string) =>
    `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\nspec:\n  restartPolicy: Never\n  containers:\n${container('sidecar').replace(/^ {4}/gm, '  ')}${container('talker').replace(/^ {4}/gm, '  ')}`;
  const deployment = (name: string) =>
    `apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: ${name}}\n  template:\n    metadata:\n      labels: {app: ${name}}\n    spec:\n      restartPolicy: Never\n      containers:\n${container('talker').replace(/^/gm, '  ')}`;
  const kubeWorkload = (name: string, manifest: string, target?: string) => ({
    ...spec(name, agentName, 'podman-kube', `${target ? `controlInterfaceTarget: ${target}\n` : ''}manifest: |\n${manifest.replace(/^/gm, '  ')}`),
    controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['desiredState'] }], denyRules: [] },
  });

  async function talkThrough(workload: WorkloadSpec, talkerContainer: string): Promise<void> {
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(workload)] } } });
    const asked = await stream.waitFor((m) => m.ToServerEnum.case === 'request', 40_000);
    expect(asked.ToServerEnum.value).to.deep.include({ requestId: `${workload.instanceName.workloadName}@r1` });
    stream.send({
      FromServerEnum: {
        case: 'response',
        value: { requestId: `${workload.instanceName.workloadName}@r1`, ResponseContent: { case: 'completeStateResponse', value: {} } },
      },
    });
    await until(() => podmanLogs(talkerContainer).trim() !== '', 'the talker to read the answer', 20_000);
    // ControlInterfaceAccepted, then Response{r1, CompleteStateResponse{}}
    expect(podmanLogs(talkerContainer).replace(/\s+/g, ' ').trim()).to.equal('02 22 00 08 1a 06 0a 02 72 31 22 00');
  }
  /** What the container printed; nothing while it does not exist yet. */
  const podmanLogs = (name: string) => {
    try {
      return execFileSync('podman', ['logs', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return '';
    }
  };

  it('a Pod: the container the target names talks to the agent over its mounted Control Interface', async () => {
    const name = podName('pod');
    await talkThrough(kubeWorkload('kpod', pod(name), `${name}/talker`), `${name}-talker`);
  });

  // swdd~podman-kube-mounts-control-interface~2
  it('a Deployment: the target names its pod as Podman does (<deployment>-pod) and its container', async () => {
    const name = podName('dep');
    await talkThrough(kubeWorkload('kdep', deployment(name), `${name}-pod/talker`), `${name}-pod-0-talker`);
  });

  it('access rules without a target, or a target that names no container: Pending(StartingFailed), not retried, no pod left', async () => {
    const [none, wrong] = [podName('none'), podName('wrong')];
    const stream = await e2e.server.nextStream();
    stream.send({
      FromServerEnum: {
        case: 'serverHello',
        value: {
          addedWorkloads: [addedWorkload(kubeWorkload('notarget', pod(none))), addedWorkload(kubeWorkload('badtarget', pod(wrong), `${wrong}/nobody`))],
        },
      },
    });
    const history = (n: string) =>
      reportedStates(stream)
        .filter(([w]) => w === n)
        .map(([, , s]) => s);
    await until(() => history('notarget').length >= 2 && history('badtarget').length >= 2, 'both to fail');
    expect(history('notarget')).to.deep.equal([
      'Pending(Starting): Triggered at runtime.',
      'Pending(StartingFailed): Control interface target not specified in runtime config.',
    ]);
    expect(history('badtarget')).to.deep.equal([
      'Pending(Starting): Triggered at runtime.',
      "Pending(StartingFailed): Cannot add Control Interface. Target container 'nobody' not found.",
    ]);
    expect(podman('pod', 'ps', '--quiet', `--filter=name=${none}`) + podman('pod', 'ps', '--quiet', `--filter=name=${wrong}`)).to.equal('');
  });
});
