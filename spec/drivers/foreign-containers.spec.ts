// A workload's config may name a container or pod that is not the agent's (another program's, another agent's,
// another workload's). A create that fails cleans up after itself by the instance's labels only: whatever the
// config names survives, on real Podman and real containerd.
import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { instanceKey } from '../../lib/workload.js';
import { IMAGE, PodmanAgent, busybox, kubePod, podman, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { harnessCli } from '../../scripts/harness/processes.js';

const nerdctl = (...args: string[]) => execFileSync('nerdctl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
/** A podman workload whose commandOptions are `options` (a quick stop beside them). */
const withOptions = (name: string, agentName: string, options: string[]) => {
  const w = busybox(name, agentName);
  return { ...w, runtimeConfig: w.runtimeConfig.replace('["--stop-timeout", "1"]', JSON.stringify(['--stop-timeout', '1', ...options])) };
};
/** Two failed creates reported (each as the retry it leads to). */
const failedTwice = (agent: PodmanAgent, name: string) =>
  new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (agent.history(name).filter((h) => /^Pending\(Starting\): Retry \d+:/.test(h)).length >= 2) {
        clearInterval(timer);
        resolve();
      }
    }, 100);
    setTimeout(() => {
      clearInterval(timer);
      reject(new Error(`${name} did not fail twice: ${agent.history(name).join(' → ')}`));
    }, 30_000);
  });

describe("a failed create touches only what carries the instance's labels", function () {
  this.timeout(60_000);
  before(requirePodman);
  let agent: PodmanAgent;
  const foreign: string[] = [];
  beforeEach(() => (agent = new PodmanAgent(uniqueAgent('foreign'))));
  afterEach(() => {
    agent.stop();
    for (const name of foreign.splice(0))
      execFileSync('sh', ['-c', `podman rm -f -t0 ${name}; podman pod kill ${name}; podman pod rm -f ${name}`], { stdio: 'ignore' });
  });

  /** A container of another program's, running or only created. */
  const foreignContainer = (running: boolean) => {
    const name = `db-${agent.agentName}-${running ? 'up' : 'made'}`;
    foreign.push(name);
    return { name, id: podman(running ? 'run' : 'create', ...(running ? ['-d'] : []), '--name', name, IMAGE, '/bin/sleep', '3600') };
  };

  // swdd~podman-create-workload-deletes-failed-container~1, swdd~agent-workload-control-loop-handles-failed-workload-creation~1
  it('a podman workload whose --name is another container and whose options Podman refuses leaves that container as it was, on every retry', async () => {
    const db = foreignContainer(true);
    agent.send({ kind: 'serverHello', added: [withOptions('intruder', agent.agentName, ['--name', db.name, '--bogus'])] });
    await failedTwice(agent, 'intruder');
    expect(podman('inspect', '--format', '{{.Id}} {{.State.Status}}', db.name)).to.equal(`${db.id} running`);
  });

  // swdd~podman-create-workload-deletes-failed-container~1
  it('a podman workload whose --name is held by a stopped container of someone else fails "already in use" and leaves it', async () => {
    const db = foreignContainer(false);
    agent.send({ kind: 'serverHello', added: [withOptions('taker', agent.agentName, ['--name', db.name])] });
    await failedTwice(agent, 'taker');
    expect(agent.history('taker').join('\n')).to.match(/already in use/);
    expect(podman('inspect', '--format', '{{.Id}}', db.name)).to.equal(db.id);
  });

  // swdd~podman-create-workload-deletes-failed-container~1
  it("a --name that is another workload's container of the same agent fails the newcomer and leaves the other running", async () => {
    const first = busybox('first', agent.agentName);
    agent.send({ kind: 'serverHello', added: [first] });
    await agent.waitFor('first', /^Running\(Ok\)$/);
    const firstKey = instanceKey(first.instanceName);
    const id = podman('inspect', '--format', '{{.Id}}', firstKey);
    agent.send({ kind: 'updateWorkload', added: [withOptions('second', agent.agentName, ['--name', firstKey])], deleted: [] });
    await failedTwice(agent, 'second');
    expect(podman('inspect', '--format', '{{.Id}} {{.State.Status}}', firstKey)).to.equal(`${id} running`);
    expect(agent.history('first').at(-1)).to.equal('Running(Ok)');
  });

  // swdd~podman-create-workload-deletes-failed-container~1
  it('a container of this very instance left by a failed create is still removed, so the retry starts clean', async () => {
    const w = busybox('leftover', agent.agentName);
    const key = instanceKey(w.instanceName);
    // A create that got as far as the container (what a crash mid-create leaves): labelled, not started.
    const left = podman('create', '--name', key, `--label=name=${key}`, `--label=agent=${agent.agentName}`, IMAGE, '/bin/sleep', '1');
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('leftover', /^Running\(Ok\)$/);
    const now = podman('ps', '--all', '--no-trunc', '--format', '{{.ID}}', `--filter=label=name=${key}`).split('\n');
    expect(now, 'one container of the instance, not the one left').to.have.length(1);
    expect(now[0]).to.not.equal(left);
  });

  // swdd~podman-kube-create-workload-apply-manifest~1
  it('a podman-kube manifest naming a pod that is already there fails and leaves that pod and its containers', async () => {
    const pod = `pod-${agent.agentName.replace(/_/g, '-')}-other`;
    foreign.push(pod);
    const podId = podman('pod', 'create', '--name', pod);
    podman('run', '-d', '--pod', pod, '--name', `${pod}-c`, IMAGE, '/bin/sleep', '3600');
    agent.send({ kind: 'serverHello', added: [kubePod('kube', agent.agentName, pod, [{ name: 'app' }])] });
    await failedTwice(agent, 'kube');
    expect(agent.history('kube').join('\n')).to.match(/already exists|in use/);
    expect(podman('pod', 'inspect', '--format', '{{.Id}} {{.State}}', pod)).to.equal(`${podId} Running`);
  });

  describe('containerd', () => {
    let ctrd: PodmanAgent;
    const names: string[] = [];
    before(function () {
      try {
        nerdctl('version');
      } catch {
        this.skip();
      }
    });
    beforeEach(() => (ctrd = new PodmanAgent(uniqueAgent('foreignc'), undefined, harnessCli('podman'))));
    afterEach(() => {
      ctrd.stop();
      for (const name of names.splice(0)) execFileSync('sh', ['-c', `nerdctl rm -f ${name}`], { stdio: 'ignore' });
    });
    const onContainerd = (name: string, options: string[]) =>
      spec(name, ctrd.agentName, 'containerd', `image: ${IMAGE}\ncommandOptions: ${JSON.stringify(options)}\ncommandArgs: ["/bin/sleep", "3600"]\n`);

    // swdd~containerd-create-workload-deletes-failed-container~1
    it('a containerd workload whose --name is another container leaves it running, whether nerdctl refuses the options or the name', async () => {
      const db = `db-${ctrd.agentName}`;
      names.push(db);
      const id = nerdctl('run', '-d', '--name', db, IMAGE, '/bin/sleep', '3600');
      ctrd.send({ kind: 'serverHello', added: [onContainerd('bogus', ['--name', db, '--bogus']), onContainerd('taker', ['--name', db])] });
      await Promise.all([failedTwice(ctrd, 'bogus'), failedTwice(ctrd, 'taker')]);
      expect(nerdctl('inspect', '--format', '{{.ID}} {{.State.Status}}', db)).to.equal(`${id} running`);
    });
  });
});
