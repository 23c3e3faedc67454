// Our agent under the released Ankaios server, beside the released agent, driven by the released `ank`
// CLI: npm run test:ankaios with ANKAIOS_BIN=<folder with ank-server, ank and ank-agent>.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { podman, requirePodman } from '../../scripts/harness/podman.js';
import { Cluster, manifest, workloadYaml } from '../../scripts/harness/ankaios.js';
import { SystemdHost, requireSystemd } from '../../scripts/harness/systemd.js';

/** The released Python SDK, which the Control Interface case runs. */
function requirePythonSdk(): void {
  try {
    execFileSync('python3', ['-c', 'import ankaios_sdk'], { stdio: 'ignore' });
  } catch {
    throw new Error("The released Python SDK is missing: pip install 'ankaios-sdk==1.0.1'.");
  }
}

/** The container ids Podman has for an agent's workloads, by workload name. */
function containers(agent: string): Map<string, string> {
  const lines = podman('ps', '--all', '--format', '{{.ID}} {{.Names}}', `--filter=label=agent=${agent}`).split('\n').filter(Boolean);
  return new Map(
    lines.map((l) => {
      const [id, name] = l.split(' ');
      return [name.split('.')[0], id];
    }),
  );
}

/** The workloads containerd runs for an agent, by workload name. */
function nerdctlContainers(agent: string): string[] {
  return execFileSync('nerdctl', ['ps', '--all', '--format', '{{.Names}}', `--filter=label=agent=${agent}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((name) => name.split('.')[0]);
}

describe('our agent under the released Ankaios server (ank-server, ank, ank-agent of ANKAIOS_BIN)', function () {
  this.timeout(180_000);
  let cluster: Cluster;
  before(requirePodman);
  beforeEach(() => (cluster = new Cluster()));
  afterEach(async () => cluster.stopAll());

  // swdd~agent-sends-hello~1
  it('the server lists our agent beside the released one, with its load', async () => {
    await cluster.startServer();
    cluster.startOurs();
    cluster.startTheirs();
    await cluster.until(async () => (await cluster.agents()).length === 2, 'both agents to be listed');
    expect(await cluster.agents()).to.deep.equal([cluster.ours, cluster.theirs].sort());
    // the load comes with the agent's first AgentLoadStatus, right after its hello
    const withLoad = new RegExp(`${cluster.ours}\\s+0\\s+\\d+%\\s+\\d+B`);
    await cluster.until(async () => withLoad.test(await cluster.ank('get', 'agents')), 'our agent listed with its load');
  });

  // swdd~agent-handles-workloads-with-fulfilled-dependencies~1
  it('the dependency example runs across both agents, in order, dependencies in both directions', async () => {
    await cluster.startServer();
    cluster.startOurs();
    cluster.startTheirs();
    const { ours, theirs } = cluster;
    await cluster.apply(
      manifest(
        workloadYaml('init_storage', theirs, 'sleep 2'),
        workloadYaml('storage_provider', ours, 'sleep 6; exit 1', '    dependencies:\n      init_storage: ADD_COND_SUCCEEDED\n'),
        workloadYaml('logger', theirs, 'sleep 1000', '    dependencies:\n      storage_provider: ADD_COND_RUNNING\n'),
        workloadYaml('error_handler', ours, 'echo handled', '    dependencies:\n      storage_provider: ADD_COND_FAILED\n'),
      ),
    );
    await cluster.waitFor('storage_provider', 'Pending(WaitingToStart)');
    expect(await cluster.stateOf('error_handler')).to.equal('Pending(WaitingToStart)');
    await cluster.waitFor('init_storage', 'Succeeded(Ok)');
    await cluster.waitFor('storage_provider', 'Running(Ok)');
    await cluster.waitFor('logger', 'Running(Ok)');
    expect(await cluster.stateOf('error_handler')).to.equal('Pending(WaitingToStart)');
    await cluster.waitFor('storage_provider', 'Failed(ExecFailed)');
    await cluster.waitFor('error_handler', 'Succeeded(Ok)');
    const failed = (await cluster.states()).find((s) => s.workload === 'storage_provider')!;
    expect(failed.additionalInfo).to.equal("Exit code: '1'");
  });

  // swdd~agent-workload-control-loop-executes-update~3, swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1
  it('update, delete, restart policy and a failing image through ank', async () => {
    await cluster.startServer();
    cluster.startOurs();
    const { ours } = cluster;
    await cluster.apply(
      manifest(
        workloadYaml('web', ours, 'sleep 1000'),
        workloadYaml('flaky', ours, 'sleep 1; exit 3', '    restartPolicy: ON_FAILURE\n'),
        `  broken:\n    runtime: podman\n    agent: ${ours}\n    runtimeConfig: |\n      image: localhost/no-such-image:latest\n`,
      ),
    );
    await cluster.waitFor('web', 'Running(Ok)');
    const first = containers(ours).get('web');
    await cluster.until(
      async () => /^Retry 2: /.test((await cluster.states()).find((s) => s.workload === 'broken')?.additionalInfo ?? ''),
      'the second retry of broken',
    );
    // Restarted by ON_FAILURE: a new container each time.
    const flakyIds = new Set<string>();
    await cluster.until(async () => {
      const id = containers(ours).get('flaky');
      if (id) flakyIds.add(id);
      return flakyIds.size >= 2;
    }, 'flaky to be restarted');
    await cluster.apply(manifest(workloadYaml('web', ours, 'sleep 2000')));
    await cluster.until(async () => containers(ours).get('web') !== first && containers(ours).get('web') !== undefined, 'web to be replaced');
    await cluster.waitFor('web', 'Running(Ok)');
    await cluster.ank('--no-wait', 'delete', 'workload', 'web', 'flaky', 'broken');
    await cluster.until(async () => (await cluster.states()).length === 0, 'every workload to be gone');
    await cluster.until(async () => containers(ours).size === 0, 'every container to be removed');
  });

  // rx~pull-ahead~1
  it('an update whose image cannot be pulled: the old one runs on, ank shows the new one Pending(Starting) with the reason; a delete leaves no state', async () => {
    await cluster.startServer();
    cluster.startOurs();
    const { ours } = cluster;
    await cluster.apply(manifest(workloadYaml('web', ours, 'sleep 1000')));
    await cluster.waitFor('web', 'Running(Ok)');
    const first = containers(ours).get('web');
    // Nothing listens on port 1: each pull fails at once.
    const unpullable = `  web:\n    runtime: podman\n    agent: ${ours}\n    runtimeConfig: |\n      image: 127.0.0.1:1/no-such:v2\n      commandOptions: ["--tls-verify=false"]\n`;
    await cluster.apply(manifest(unpullable));
    const rows = async () => (await cluster.states()).filter((s) => s.workload === 'web');
    await cluster.until(
      async () => (await rows()).some((r) => /^Retry 2: .*connection refused \(the old instance runs/.test(r.additionalInfo)),
      'the second failed pull told',
    );
    const both = await rows();
    expect(both.map((r) => `${r.state}(${r.subState})`).sort()).to.deep.equal(['Pending(Starting)', 'Running(Ok)']);
    expect(containers(ours).get('web'), 'the old container still there').to.equal(first);
    expect(podman('inspect', '--format', '{{.State.Status}}', first!)).to.equal('running');
    await cluster.ank('--no-wait', 'delete', 'workload', 'web');
    await cluster.until(async () => (await cluster.states()).length === 0, 'no state of web left at the server');
    await cluster.until(async () => containers(ours).size === 0, 'the old container removed');
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    // swdd~grpc-agent-connection-sends-agent-gone~1
    it(`our agent stopped by ${signal} is gone at the server (AgentDisconnected); started again, its workloads are resumed, not recreated`, async () => {
      await cluster.startServer();
      cluster.startOurs();
      cluster.startTheirs();
      await cluster.apply(manifest(workloadYaml('steady', cluster.ours, 'sleep 1000'), workloadYaml('watcher', cluster.theirs, 'sleep 1000')));
      await cluster.waitFor('steady', 'Running(Ok)');
      await cluster.waitFor('watcher', 'Running(Ok)');
      const before = containers(cluster.ours).get('steady');
      await cluster.ourAgent!.stop(signal);
      await cluster.waitFor('steady', 'AgentDisconnected(AgentDisconnected)', 20_000);
      expect(await cluster.agents()).to.deep.equal([cluster.theirs]);
      expect(await cluster.stateOf('watcher')).to.equal('Running(Ok)');
      expect(podman('inspect', '--format', '{{.State.Running}}', before!)).to.equal('true');
      cluster.startOurs();
      await cluster.waitFor('steady', 'Running(Ok)');
      expect(containers(cluster.ours).get('steady')).to.equal(before);
    });
  }

  // rx~podman-service~1
  it("the released agent started under our agent's name resumes the containers ours made through the Podman service, and ours resumes the released agent's", async () => {
    await cluster.startServer();
    cluster.startOurs();
    await cluster.apply(manifest(workloadYaml('handed', cluster.ours, 'sleep 1000')));
    await cluster.waitFor('handed', 'Running(Ok)');
    const made = containers(cluster.ours).get('handed');
    expect(readdirSync(path.join(cluster.runFolder('ours'), `${cluster.ours}_io`)), 'our agent has its Podman service').to.include('podman.sock');
    await cluster.ourAgent!.stop('SIGTERM');
    await cluster.waitFor('handed', 'AgentDisconnected(AgentDisconnected)', 20_000);
    cluster.startTheirs(cluster.ours);
    await cluster.waitFor('handed', 'Running(Ok)');
    await cluster.apply(manifest(workloadYaml('handed', cluster.ours, 'sleep 1000'), workloadYaml('theirs_made', cluster.ours, 'sleep 1000')));
    await cluster.waitFor('theirs_made', 'Running(Ok)');
    const madeByTheirs = containers(cluster.ours).get('theirs_made');
    expect(containers(cluster.ours).get('handed'), 'the released agent resumed it').to.equal(made);
    await cluster.theirAgent!.stop('SIGTERM');
    await cluster.waitFor('theirs_made', 'AgentDisconnected(AgentDisconnected)', 20_000);
    cluster.startOurs();
    await cluster.waitFor('handed', 'Running(Ok)');
    await cluster.waitFor('theirs_made', 'Running(Ok)');
    expect([containers(cluster.ours).get('handed'), containers(cluster.ours).get('theirs_made')], 'ours resumed both').to.deep.equal([made, madeByTheirs]);
  });

  it('the server restarted with its start-up manifest: both agents reconnect, nothing running is recreated', async () => {
    const text = (c: Cluster) => manifest(workloadYaml('kept', c.ours, 'sleep 1000'), workloadYaml('kept_theirs', c.theirs, 'sleep 1000'));
    await cluster.startServer({ manifest: text(cluster) });
    cluster.startOurs();
    cluster.startTheirs();
    await cluster.waitFor('kept', 'Running(Ok)');
    await cluster.waitFor('kept_theirs', 'Running(Ok)');
    const before = [containers(cluster.ours).get('kept'), containers(cluster.theirs).get('kept_theirs')];
    await cluster.server!.stop('SIGKILL');
    await cluster.startServer({ manifest: text(cluster) });
    await cluster.until(async () => (await cluster.agents()).length === 2, 'both agents to reconnect');
    await cluster.waitFor('kept', 'Running(Ok)');
    await cluster.waitFor('kept_theirs', 'Running(Ok)');
    expect([containers(cluster.ours).get('kept'), containers(cluster.theirs).get('kept_theirs')]).to.deep.equal(before);
  });

  // swdd~agent-handles-logs-requests-from-server~1
  it('ank logs (and -f) shows the output of a workload on our agent', async () => {
    await cluster.startServer();
    cluster.startOurs();
    await cluster.apply(manifest(workloadYaml('talker', cluster.ours, 'i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done')));
    await cluster.waitFor('talker', 'Running(Ok)');
    await cluster.until(async () => (await cluster.ank('logs', 'talker')).includes('line 3'), 'four lines of logs');
    const tail = (await cluster.ank('logs', '--tail', '2', 'talker')).trim().split('\n');
    expect(tail).to.have.length(2);
    expect(tail[0]).to.match(/^line \d+$/);
    // -f goes on with the lines printed after it started.
    const last = Number(/line (\d+)/.exec(tail[1])![1]);
    const follow = cluster.follow('logs', '-f', '--tail', '1', 'talker');
    await cluster.until(async () => (follow.output.match(/line (\d+)/g) ?? []).some((l) => Number(l.slice(5)) > last + 3), 'ank logs -f to follow new lines');
    await follow.stop();
  });

  it('a workload moved from the released agent to ours and back on the same host', async () => {
    await cluster.startServer();
    cluster.startOurs();
    cluster.startTheirs();
    await cluster.apply(manifest(workloadYaml('mover', cluster.theirs, 'sleep 1000')));
    await cluster.waitFor('mover', 'Running(Ok)');
    await cluster.apply(manifest(workloadYaml('mover', cluster.ours, 'sleep 1000')));
    await cluster.until(
      async () => (await cluster.states()).some((s) => s.workload === 'mover' && s.agent === cluster.ours && s.state === 'Running'),
      'mover to run on our agent',
    );
    await cluster.until(async () => containers(cluster.theirs).size === 0, 'the released agent to remove its container');
    await cluster.apply(manifest(workloadYaml('mover', cluster.theirs, 'sleep 1000')));
    await cluster.until(
      async () => (await cluster.states()).some((s) => s.workload === 'mover' && s.agent === cluster.theirs && s.state === 'Running'),
      'mover to run on the released agent again',
    );
    await cluster.until(async () => containers(cluster.ours).size === 0, 'our agent to remove its container');
  });

  // swdd~agent-supports-containerd~1, swdd~containerd-state-getter-maps-state~1, swdd~containerd-delete-workload-stops-and-removes-workload~1
  it('containerd workloads: each agent runs its own, exits reach the server, and one moved from the released agent to ours and back', async () => {
    await cluster.startServer();
    cluster.startOurs();
    cluster.startTheirs();
    const { ours, theirs } = cluster;
    const onContainerd = (name: string, agent: string, script: string) => workloadYaml(name, agent, script, '', 'containerd');
    // The released agent reads its containers' states with one `nerdctl inspect` of every container of the
    // namespace (ours too), which nerdctl 2.0 answers with an array per container that it cannot parse: its
    // workload runs, and is reported, before ours is created.
    await cluster.apply(manifest(onContainerd('c_mover', theirs, 'sleep 1000')));
    await cluster.waitFor('c_mover', 'Running(Ok)');
    await cluster.apply(manifest(onContainerd('c_ours', ours, 'sleep 2; exit 4')));
    await cluster.waitFor('c_ours', 'Failed(ExecFailed)');
    expect(nerdctlContainers(ours)).to.deep.equal(['c_ours']);
    expect(nerdctlContainers(theirs)).to.deep.equal(['c_mover']);
    await cluster.apply(manifest(onContainerd('c_mover', ours, 'sleep 1000')));
    await cluster.until(
      async () => (await cluster.states()).some((s) => s.workload === 'c_mover' && s.agent === ours && s.state === 'Running'),
      'c_mover to run on our agent',
    );
    await cluster.until(async () => nerdctlContainers(theirs).length === 0, 'the released agent to remove its container');
    // `ank apply` leaves c_ours as it is (it only adds and updates); `ank delete workload` deletes it.
    await cluster.ank('delete', 'workload', 'c_ours');
    await cluster.until(async () => nerdctlContainers(ours).join() === 'c_mover', 'our agent to remove c_ours');
    await cluster.apply(manifest(onContainerd('c_mover', theirs, 'sleep 1000')));
    await cluster.until(
      async () => (await cluster.states()).some((s) => s.workload === 'c_mover' && s.agent === theirs && s.state === 'Running'),
      'c_mover to run on the released agent again',
    );
    await cluster.until(async () => nerdctlContainers(ours).length === 0, 'our agent to remove its container');
  });

  // rx~systemd-runtime~1, rx~systemd-states~1, rx~systemd-events~1
  it('systemd workloads: the server shows a unit of ours as any workload, restarted by its policy, updated, its logs through ank, stopped on delete', async () => {
    requireSystemd();
    const host = await SystemdHost.start();
    try {
      host.install({ 'talker.service': 'ExecStart=/bin/sh -c "echo talking; exec sleep 3600"' });
      await cluster.startServer();
      cluster.startOurs(host.bin);
      const { ours } = cluster;
      const unit = (state: string) =>
        `  svc:\n    runtime: systemd\n    agent: ${ours}\n    restartPolicy: ON_FAILURE\n    runtimeConfig: |\n      serviceName: talker.service\n      desiredState: ${state}\n`;
      await cluster.apply(manifest(unit('running'), workloadYaml('after', ours, 'sleep 1000', '    dependencies:\n      svc: ADD_COND_RUNNING\n')));
      await cluster.waitFor('svc', 'Running(Ok)');
      await cluster.waitFor('after', 'Running(Ok)');
      expect(await cluster.ank('get', 'workloads')).to.match(/svc\s+\S+\s+systemd\s+Running\(Ok\)/);
      const pid = host.property('talker.service', 'MainPID');
      host.exec('systemctl', 'kill', '--signal=KILL', 'talker.service');
      await cluster.until(async () => !['0', pid].includes(host.property('talker.service', 'MainPID')), 'the unit to be started again by ON_FAILURE');
      await cluster.waitFor('svc', 'Running(Ok)');
      expect(await cluster.ank('logs', 'svc')).to.include('talking');
      await cluster.apply(manifest(unit('stopped'), workloadYaml('after', ours, 'sleep 1000', '    dependencies:\n      svc: ADD_COND_RUNNING\n')));
      await cluster.waitFor('svc', 'Succeeded(Ok)');
      expect(host.property('talker.service', 'ActiveState')).to.equal('inactive');
      await cluster.apply(manifest(unit('running')));
      await cluster.waitFor('svc', 'Running(Ok)');
      await cluster.ank('--no-wait', 'delete', 'workload', 'svc', 'after');
      await cluster.until(async () => (await cluster.states()).length === 0, 'every workload to be gone');
      expect(host.property('talker.service', 'ActiveState')).to.equal('inactive');
      expect(host.property('talker.service', 'LoadState')).to.equal('loaded');
    } finally {
      host.stop();
    }
  });

  it('a podman-kube workload moved from the released agent to ours and back: its pod runs under each, and each agent takes down what it played', async () => {
    await cluster.startServer();
    cluster.startOurs();
    cluster.startTheirs();
    const pod = `kube-${cluster.ours.replace(/_/g, '-')}`;
    const kube = (agent: string) =>
      manifest(`  kubed:
    runtime: podman-kube
    agent: ${agent}
    runtimeConfig: |
      manifest: |
        apiVersion: v1
        kind: Pod
        metadata:
          name: ${pod}
        spec:
          restartPolicy: Never
          containers:
          - name: app
            image: localhost/busybox:latest
            command: ["/bin/sleep", "3600"]
`);
    const podRuns = () => podman('pod', 'ps', '--format', '{{.Name}} {{.Status}}', `--filter=name=^${pod}$`).includes('Running');
    const runsOn = (agent: string) => async () => (await cluster.states()).some((s) => s.workload === 'kubed' && s.agent === agent && s.state === 'Running');
    await cluster.apply(kube(cluster.theirs));
    await cluster.until(runsOn(cluster.theirs), 'kubed to run on the released agent');
    expect(podRuns()).to.equal(true);
    await cluster.apply(kube(cluster.ours));
    await cluster.until(runsOn(cluster.ours), 'kubed to run on our agent');
    await cluster.until(async () => podRuns(), 'the pod to run again under our agent');
    await cluster.apply(kube(cluster.theirs));
    await cluster.until(runsOn(cluster.theirs), 'kubed to run on the released agent again');
    await cluster.until(async () => podRuns(), 'the pod to run again under the released agent');
    await cluster.ank('--no-wait', 'delete', 'workload', 'kubed');
    await cluster.until(async () => podman('pod', 'ps', '--quiet', `--filter=name=^${pod}$`) === '', 'the pod to be taken down');
  });

  // swdd~agent-create-control-interface-pipes-per-workload~2
  it('the released Python SDK in a workload of ours reads the state, applies a workload on the released agent, gets its events, and is heard again after our agent restarts', async () => {
    requirePythonSdk();
    await cluster.startServer();
    cluster.startOurs();
    cluster.startTheirs();
    await cluster.apply(
      manifest(
        workloadYaml(
          'sdkhost',
          cluster.ours,
          'sleep 3600',
          '    controlInterfaceAccess:\n      allowRules:\n      - type: StateRule\n        operation: ReadWrite\n        filterMasks: ["desiredState", "workloadStates"]\n',
        ),
      ),
    );
    await cluster.waitFor('sdkhost', 'Running(Ok)');
    const io = path.join(cluster.runFolder('ours'), `${cluster.ours}_io`);
    const folder = path.join(io, readdirSync(io).find((f) => f.startsWith('sdkhost.'))!, 'control_interface');
    // The SDK, unmodified, on the host: in a mount namespace of its own the workload's folder is at the SDK's path.
    const app = spawn('unshare', [
      '-m',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount -t tmpfs none /run && mkdir -p /run/ankaios/control_interface && mount --bind "$0" /run/ankaios/control_interface && exec python3 "$1" "$2"',
      folder,
      path.resolve('spec/ankaios/sdk_app.py'),
      cluster.theirs,
    ]);
    const said: Array<Record<string, unknown>> = [];
    let errors = '';
    app.stdout.on('data', (d: Buffer) =>
      d
        .toString()
        .split('\n')
        .filter(Boolean)
        .forEach((l) => said.push(JSON.parse(l) as Record<string, unknown>)),
    );
    app.stderr.on('data', (d: Buffer) => (errors += d.toString()));
    const step = (name: string) => said.find((s) => s.step === name);
    try {
      await cluster.until(async () => step('state') !== undefined, `the SDK to read the state (${errors})`);
      expect(step('state')!.workloads).to.deep.equal(['sdkhost']);
      await cluster.until(async () => step('event') !== undefined, `an event for the workload the SDK applied (${errors})`);
      expect(
        (step('event')!.altered as string[]).some((f) => f.startsWith(`workloadStates.${cluster.theirs}`)),
        JSON.stringify(step('event')),
      ).to.equal(true);
      await cluster.waitFor('from_sdk', 'Running(Ok)');
      expect((await cluster.states()).find((s) => s.workload === 'from_sdk')!.agent).to.equal(cluster.theirs);
      await cluster.ourAgent!.stop('SIGTERM');
      cluster.startOurs();
      await cluster.waitFor('sdkhost', 'Running(Ok)');
      app.stdin.write('again\n');
      await cluster.until(async () => step('again') !== undefined, `the SDK to be heard after the restart (${errors})`);
      expect(step('again')!.workloads).to.deep.equal(['from_sdk', 'sdkhost']);
    } finally {
      app.kill('SIGKILL');
    }
  });

  it('mTLS: our agent connects to a released server with certificates the suite makes, and runs a workload', async () => {
    await cluster.startServer({ tls: true });
    cluster.startOurs();
    await cluster.until(async () => (await cluster.agents()).includes(cluster.ours), 'our agent to connect over mTLS');
    await cluster.apply(manifest(workloadYaml('secure', cluster.ours, 'sleep 1000')));
    await cluster.waitFor('secure', 'Running(Ok)');
  });
});
