// What a server or a workload may send cannot steer the root agent outside its run folder.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { endToEnd } from '../helpers/end-to-end.js';
import { addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { busybox } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';
import { specFolder } from '../../scripts/harness/temp.js';

describe('hostile input and faults (end to end)', function () {
  this.timeout(90_000);
  const e2e = endToEnd('hostile');
  const { agentName } = e2e;

  it('hostile workload names and instance ids are refused alone with the rule named; nothing is created outside the run folder; the good workload runs', async () => {
    const run = specFolder('ank-hostile-');
    const outside = specFolder('ank-outside-');
    const access = { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] };
    const files = [{ mountPoint: '/etc/x.conf', data: 'x' }];
    const good = { ...busybox('good', agentName, { files }), controlInterfaceAccess: access };
    const withName = (workloadName: string) => ({ ...good, instanceName: { ...good.instanceName, workloadName } });
    const withId = (id: string) => ({ ...good, instanceName: { ...good.instanceName, workloadName: 'evil_id', id } });
    const hostile = [
      withName('../x'),
      withName('a.b'),
      withName('n'.repeat(200)),
      withName('a"b'),
      withName('a\nb'),
      withName('m'.repeat(300)),
      withId(`/../../..${outside}/target`),
      withId('ABC'),
    ];
    e2e.start({ run });
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [...hostile, withName(''), good].map(addedWorkload) } } });
    await until(() => reportedStates(stream).some(([n, , s]) => n === 'good' && s === 'Running(Ok)'), 'the good workload to run');
    await until(() => reportedStates(stream).filter(([, , s]) => s.startsWith('Pending(StartingFailed)')).length === hostile.length, 'the refusals');
    const refusals = reportedStates(stream)
      .filter(([, , s]) => s.startsWith('Pending(StartingFailed)'))
      .map(([n, , s]) => [n.slice(0, 8), s.replace(/'[^']*'/, "'…'")]);
    expect(refusals).to.deep.equal([
      ['../x', "Pending(StartingFailed): Invalid workload name '…': a workload name has 1 to 63 letters, digits, '-' or '_'."],
      ['a.b', "Pending(StartingFailed): Invalid workload name '…': a workload name has 1 to 63 letters, digits, '-' or '_'."],
      ['nnnnnnnn', "Pending(StartingFailed): Invalid workload name '…': a workload name has 1 to 63 letters, digits, '-' or '_'."],
      ['a"b', "Pending(StartingFailed): Invalid workload name '…': a workload name has 1 to 63 letters, digits, '-' or '_'."],
      ['a\nb', "Pending(StartingFailed): Invalid workload name '…': a workload name has 1 to 63 letters, digits, '-' or '_'."],
      ['mmmmmmmm', "Pending(StartingFailed): Invalid workload name '…': a workload name has 1 to 63 letters, digits, '-' or '_'."],
      ['evil_id', "Pending(StartingFailed): Invalid instance id '…': an instance id is the SHA-256 of the runtime config, 64 lowercase hex digits."],
      ['evil_id', "Pending(StartingFailed): Invalid instance id '…': an instance id is the SHA-256 of the runtime config, 64 lowercase hex digits."],
    ]);
    expect(
      reportedStates(stream).map(([n]) => n),
      'a workload without a name cannot even be answered',
    ).not.to.include('');
    expect(readdirSync(outside)).to.deep.equal([]);
    expect(existsSync(path.join(run, 'x')) || existsSync(path.join(path.dirname(run), 'x'))).to.equal(false);
    expect(readdirSync(run)).to.deep.equal([`${agentName}_io`]);
    // Beside the workload's folder only the socket of the agent's Podman service and its pid.
    expect(readdirSync(path.join(run, `${agentName}_io`)).filter((f) => !f.startsWith('podman.sock'))).to.deep.equal([`good.${good.instanceName.id}`]);
  });

  it('a SIGKILL of the agent in the middle of its creates, then a restart: every workload runs', async () => {
    const run = specFolder('ank-crash-');
    const workloads = Array.from({ length: 6 }, (_, i) => busybox(`w${i}`, agentName));
    e2e.start({ run });
    const first = await e2e.server.nextStream();
    first.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: workloads.map(addedWorkload) } } });
    await until(() => reportedStates(first).some(([, , s]) => s.startsWith('Pending(Starting)')), 'the creates to begin');
    e2e.agent!.kill('SIGKILL');
    await new Promise((r) => e2e.agent!.once('close', r));
    e2e.start({ run });
    const second = await e2e.server.nextStream(10_000, 1);
    second.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: workloads.map(addedWorkload) } } });
    const running = () => workloads.filter((w) => reportedStates(second).some(([n, , s]) => n === w.instanceName.workloadName && s === 'Running(Ok)'));
    await until(() => running().length === workloads.length, `every workload to run (running: ${running().map((w) => w.instanceName.workloadName)})`, 60_000);
    expect(reportedStates(second).filter(([, , s]) => s.startsWith('Pending(StartingFailed)'))).to.deep.equal([]);
  });

  it('a flood of Control Interface requests while the server does not read: the agent stops reading the pipe (the workload gets EAGAIN) and its memory stays bounded', async () => {
    const run = specFolder('ank-flood-');
    const ctl = {
      ...busybox('ctl', agentName),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] },
    };
    e2e.start({ run });
    const stream = await e2e.server.nextStream();
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(ctl)] } } });
    await until(() => reportedStates(stream).some(([n, , s]) => n === 'ctl' && s === 'Running(Ok)'), 'ctl to run');
    const client = new ControlInterfaceClient(controlInterfaceFolder(path.join(run, `${agentName}_io`), ctl));
    try {
      client.hello();
      await client.next();
      stream.stall();
      const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${e2e.agent!.pid}/status`, 'utf8'))![1]) / 1024;
      const before = rss();
      // 400 000 requests, written as fast as the pipe takes them; EAGAIN means the agent stopped reading.
      const request = (i: number) =>
        ControlInterfaceClient.frame({
          ToAnkaiosEnum: {
            case: 'request',
            value: { requestId: `r${i}`, RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState.workloads'] } } },
          },
        });
      let written = 0;
      let refused = 0;
      for (let i = 0; i < 400_000 && refused < 200; i++) {
        try {
          client.sendRaw(request(i));
          written += 1;
          refused = 0;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
          refused += 1;
          i -= 1;
          await new Promise((r) => setTimeout(r, 10));
        }
      }
      expect(refused, `the agent read all ${written} requests`).to.equal(200);
      expect(written).to.be.below(400_000);
      expect(rss() - before, 'MiB the flood cost the agent').to.be.below(64);
    } finally {
      client.close();
    }
  });
});
