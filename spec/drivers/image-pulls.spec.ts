// Images pulled ahead, against a real registry (Debian's docker-registry on a loopback port, its store in a
// temporary folder) and real Podman: an update's new image while the old instance runs, a waiting workload's
// while it waits, and the released order with pull_ahead off.
import { execFileSync, spawnSync } from 'node:child_process';
import { expect } from 'chai';
import { formatState } from '../../lib/execution-state.js';
import { type WorkloadSpec, instanceKey } from '../../lib/workload.js';
import { IMAGE, PodmanAgent, SLEEP_UNTIL_STOPPED, busybox, kubePod, podman, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { Registry, hasRegistry } from '../../scripts/harness/registry.js';
import { until } from '../../scripts/harness/wait.js';

/** A workload of `image` from the registry (no TLS on loopback), sleeping until stopped. */
const fromRegistry = (name: string, agentName: string, image: string, more: string[] = [], dependencies: Record<string, 'Succeeded'> = {}) =>
  spec(
    name,
    agentName,
    'podman',
    `image: ${image}\ncommandOptions: ${JSON.stringify(['--stop-timeout', '1', '--tls-verify=false', ...more])}\ncommandArgs: ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]\n`,
    { dependencies },
  );

/** When Podman says `event` happened to `what` (an image or a container) since `since`, in ms. */
function eventTimes(since: number, event: string, what: string): number[] {
  const out = execFileSync('podman', ['events', '--stream=false', '--since', new Date(since).toISOString(), '--filter', `event=${event}`, '--format', 'json'], {
    encoding: 'utf8',
  });
  return out
    .split('\n')
    .filter((line) => line.includes(what))
    .map((line) => Date.parse((JSON.parse(line) as { Time: string }).Time));
}

describe('images pulled ahead (real registry, real Podman)', function () {
  this.timeout(120_000);
  const registry = new Registry();
  let big = '';
  let small = '';
  before(async () => {
    requirePodman();
    if (!hasRegistry()) throw new Error('docker-registry is missing: run scripts/setup-registry.sh (scripts/setup-tests.sh runs it)');
    await registry.start();
    big = registry.pushBig('big:v1', 40, IMAGE);
    small = registry.push(IMAGE, 'small:v1');
  });
  after(async () => {
    await registry.stop();
    registry.remove();
  });
  let agent: PodmanAgent;
  afterEach(() => {
    agent.stop();
    spawnSync('podman', ['rmi', '--force', big, small], { stdio: 'ignore' });
  });

  /** A running busybox workload updated to the big image of the registry; resolves once the new one runs. */
  async function updateToPulledImage(pullAhead: boolean) {
    agent = new PodmanAgent(uniqueAgent(pullAhead ? 'pull' : 'nopull'), undefined, undefined, { pullAhead });
    const old = busybox('web', agent.agentName, { script: "trap 'exit 0' TERM; sleep 3600 & wait" });
    agent.send({ kind: 'serverHello', added: [old] });
    await agent.waitFor('web', /^Running\(Ok\)$/);
    const since = Date.now();
    const next = fromRegistry('web', agent.agentName, big);
    agent.send({ kind: 'updateWorkload', added: [next], deleted: [{ instanceName: old.instanceName, dependencies: {} }] });
    await until(
      () => agent.states.some((s) => s.instanceName.id === next.instanceName.id && s.executionState.state === 'Running'),
      'the new one to run',
      60_000,
    );
    return { pulled: eventTimes(since, 'pull', 'big:v1')[0], died: eventTimes(since, 'died', old.instanceName.id)[0] };
  }

  // rx~pull-ahead~1
  it('an update whose new image must be pulled keeps the old instance running until the image is there', async () => {
    const { pulled, died } = await updateToPulledImage(true);
    expect(pulled, 'the pull').to.be.a('number');
    expect(pulled, 'the image was there before the old one stopped').to.be.below(died);
    expect(
      agent.history('web').filter((h) => h.startsWith('Stopping')),
      'one stop, after the pull',
    ).to.have.length(1);
  });

  // rx~pull-ahead~1
  it('with pull_ahead off the old instance stops first and the create pulls, as the released agent does', async () => {
    const { pulled, died } = await updateToPulledImage(false);
    expect(pulled).to.be.above(died);
  });

  // rx~pull-ahead~1
  it('a pull that fails (the registry is down) keeps the old instance and retries; a delete during the wait ends it at once', async () => {
    agent = new PodmanAgent(uniqueAgent('down'), undefined, undefined, { pullAhead: true });
    const first = busybox('api', agent.agentName, { script: "trap 'exit 0' TERM; sleep 3600 & wait" });
    const second = busybox('db', agent.agentName, { script: "trap 'exit 0' TERM; sleep 3600 & wait" });
    agent.send({ kind: 'serverHello', added: [first, second] });
    await agent.waitFor('api', /^Running\(Ok\)$/);
    await agent.waitFor('db', /^Running\(Ok\)$/);
    await registry.stop();
    try {
      const api2 = fromRegistry('api', agent.agentName, small);
      const db2 = fromRegistry('db', agent.agentName, small, ['--label=v=2']);
      agent.send({
        kind: 'updateWorkload',
        added: [api2, db2],
        deleted: [first, second].map((w) => ({ instanceName: w.instanceName, dependencies: {} })),
      });
      // Each failed pull (Podman's takes 3 s, its own three tries) is told on the new instance in Podman's last
      // words; both old ones still run.
      const of = (w: WorkloadSpec) => agent.states.filter((s) => s.instanceName.id === w.instanceName.id).map((s) => formatState(s.executionState));
      const failed = /^Pending\(Starting\): Retry 2: initializing source .*connection refused \(the old instance runs until the image is pulled\)$/;
      await until(() => [api2, db2].every((next) => of(next).some((h) => failed.test(h))), 'two failed pulls told', 30_000);
      for (const old of [first, second]) expect(of(old).at(-1), old.instanceName.workloadName).to.equal('Running(Ok)');
      expect(
        podman('ps', '--filter', `label=agent=${agent.agentName}`, '--format', '{{.Status}}')
          .split('\n')
          .map((s) => s.split(' ')[0]),
      ).to.deep.equal(['Up', 'Up']);
      // A delete of db ends its wait at once.
      agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: db2.instanceName, dependencies: {} }] });
      await until(() => of(second).at(-1) === 'Removed', 'the old db removed', 10_000);
      expect(of(db2).at(-1), 'the waiting db2 given up').to.equal('Removed');
      // The registry back, the next try pulls and api is replaced.
      await registry.start();
      await until(
        () => agent.states.some((s) => s.instanceName.id === api2.instanceName.id && s.executionState.state === 'Running'),
        'the new api to run',
        60_000,
      );
      expect(
        agent.history('db').filter((h) => h.startsWith('Pending') && !h.includes('Retry')),
        'db2 was never created',
      ).to.deep.equal(['Pending(Starting): Triggered at runtime.']);
    } finally {
      await registry.start();
    }
  });

  // rx~pull-ahead~1, rx~pull-ahead-registry~1
  it('--pull=always pulls the image again before the old instance stops, though it is there: the new one runs what the registry has now', async () => {
    agent = new PodmanAgent(uniqueAgent('always'), undefined, undefined, { pullAhead: true });
    const old = fromRegistry('web', agent.agentName, small);
    agent.send({ kind: 'serverHello', added: [old] });
    await agent.waitFor('web', /^Running\(Ok\)$/, 30_000);
    const imageOf = (w: WorkloadSpec) => podman('ps', '--filter', `label=name=${instanceKey(w.instanceName)}`, '--format', '{{.ImageID}}');
    const before = imageOf(old);
    // The same tag, other content.
    const pushed = registry.pushBig('small:v1', 1, IMAGE);
    expect(pushed).to.equal(small);
    const since = Date.now();
    const next = fromRegistry('web', agent.agentName, small, ['--pull=always']);
    agent.send({ kind: 'updateWorkload', added: [next], deleted: [{ instanceName: old.instanceName, dependencies: {} }] });
    await until(
      () => agent.states.some((s) => s.instanceName.id === next.instanceName.id && s.executionState.state === 'Running'),
      'the new one to run',
      60_000,
    );
    const [pulled] = eventTimes(since, 'pull', 'small:v1');
    const [died] = eventTimes(since, 'died', old.instanceName.id);
    expect(pulled, 'pulled before the old one stopped').to.be.below(died);
    expect(imageOf(next), "the registry's new content").to.not.equal(before);
  });

  // rx~pull-ahead-waiting~1
  it('a workload waiting on its dependency has its image pulled meanwhile', async () => {
    agent = new PodmanAgent(uniqueAgent('wait'), undefined, undefined, { pullAhead: true });
    const first = busybox('init', agent.agentName, { script: 'sleep 3' });
    const later = fromRegistry('app', agent.agentName, big, [], { init: 'Succeeded' });
    const since = Date.now();
    agent.send({ kind: 'serverHello', added: [first, later] });
    await agent.waitFor('app', /^Running\(Ok\)$/, 60_000);
    const [pulled] = eventTimes(since, 'pull', 'big:v1');
    const [initDied] = eventTimes(since, 'died', first.instanceName.id);
    expect(pulled, 'pulled while init ran').to.be.below(initDied);
    expect(agent.history('app')[0]).to.equal('Pending(WaitingToStart)');
  });

  // rx~pull-ahead~1, rx~pull-ahead-registry~1
  it('a podman-kube or containerd workload too: a pull that fails keeps its old instance running; with the registry back it is replaced', async () => {
    try {
      execFileSync('nerdctl', ['version'], { stdio: 'ignore' });
    } catch {
      throw new Error('nerdctl and containerd are missing: run scripts/setup-containerd.sh (scripts/setup-tests.sh runs it)');
    }
    agent = new PodmanAgent(uniqueAgent('pullfam'), undefined, undefined, { pullAhead: true });
    const pod = `${agent.agentName.replace(/_/g, '-')}-web`;
    const kubeOld = kubePod('kube', agent.agentName, pod, [{ name: 'c' }]);
    const ctrdOld = spec('ctrd', agent.agentName, 'containerd', `image: ${IMAGE}\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(SLEEP_UNTIL_STOPPED)}]\n`);
    agent.send({ kind: 'serverHello', added: [kubeOld, ctrdOld] });
    await agent.waitFor('kube', /^Running\(Ok\)$/, 30_000);
    await agent.waitFor('ctrd', /^Running\(Ok\)$/, 30_000);
    await registry.stop();
    try {
      const kubeNew = kubePod('kube', agent.agentName, pod, [{ name: 'c', image: small }], { extra: 'playOptions: ["--tls-verify=false"]' });
      const ctrdNew = spec(
        'ctrd',
        agent.agentName,
        'containerd',
        `image: ${small}\ngeneralOptions: ["--insecure-registry"]\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(SLEEP_UNTIL_STOPPED)}]\n`,
      );
      agent.send({
        kind: 'updateWorkload',
        added: [kubeNew, ctrdNew],
        deleted: [kubeOld, ctrdOld].map((w) => ({ instanceName: w.instanceName, dependencies: {} })),
      });
      const of = (w: WorkloadSpec) => agent.states.filter((s) => s.instanceName.id === w.instanceName.id).map((s) => formatState(s.executionState));
      // Each CLI's last words: Podman's error, nerdctl's fatal message, not their retries and fetches.
      const failed = (said: string) =>
        new RegExp(`^Pending\\(Starting\\): Retry 2: ${said} .*connection refused \\(the old instance runs until the image is pulled\\)$`);
      await until(
        () => of(kubeNew).some((h) => failed('initializing source').test(h)) && of(ctrdNew).some((h) => failed('failed to resolve reference').test(h)),
        'two failed pulls of each told',
        30_000,
      );
      expect(of(kubeOld).at(-1), 'the old pod').to.equal('Running(Ok)');
      expect(of(ctrdOld).at(-1), 'the old container').to.equal('Running(Ok)');
      expect(podman('pod', 'ps', '--filter', `name=^${pod}$`, '--format', '{{.Status}}')).to.equal('Running');
      expect(execFileSync('nerdctl', ['ps', '--filter', `label=agent=${agent.agentName}`, '--format', '{{.Status}}'], { encoding: 'utf8' }).trim()).to.match(
        /^Up/,
      );
      await registry.start();
      for (const next of [kubeNew, ctrdNew]) await until(() => of(next).at(-1) === 'Running(Ok)', `the new ${next.instanceName.workloadName} to run`, 60_000);
      for (const old of [kubeOld, ctrdOld]) expect(of(old).slice(-2), old.instanceName.workloadName).to.deep.equal(['Stopping(RequestedAtRuntime)', 'Removed']);
    } finally {
      await registry.start();
      spawnSync('nerdctl', ['rmi', '--force', small], { stdio: 'ignore' });
    }
  });
});
