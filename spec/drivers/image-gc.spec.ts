// The images the agent pulled, collected once no container uses them (lib/runtimes/containers/image-gc.ts), against a
// real registry and real Podman; a user's image and one a stopped container uses are never removed.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import type { WorkloadSpec } from '../../lib/workload.js';
import { IMAGE, PodmanAgent, SLEEP_UNTIL_STOPPED, busybox, kubePod, podman, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { HOLD_REPOSITORY } from '../../lib/runtimes/containers/image-holds.js';
import { harnessCli } from '../../scripts/harness/processes.js';
import { Registry, hasRegistry } from '../../scripts/harness/registry.js';
import { until } from '../../scripts/harness/wait.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** A workload of `image` from the registry, in the storage that `generalOptions` choose (Podman's own unless given). */
const fromRegistry = (name: string, agentName: string, image: string, generalOptions: readonly string[] = []) =>
  spec(
    name,
    agentName,
    'podman',
    `generalOptions: ${JSON.stringify(generalOptions)}\nimage: ${image}\ncommandOptions: ["--stop-timeout", "1", "--tls-verify=false"]\ncommandArgs: ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]\n`,
  );

const exists = (image: string) => spawnSync('podman', ['image', 'exists', image]).status === 0;

describe('images the agent pulled, collected (real registry, real Podman)', function () {
  this.timeout(180_000);
  const registry = new Registry();
  const images: string[] = [];
  let user = '';
  before(async () => {
    requirePodman();
    if (!hasRegistry()) throw new Error('docker-registry is missing: run scripts/setup-registry.sh (scripts/setup-tests.sh runs it)');
    await registry.start();
    for (let i = 1; i <= 4; i++) images.push(registry.pushBig(`gc:v${i}`, 1, IMAGE));
    user = registry.pushBig('gc:user', 1, IMAGE);
  });
  after(async () => {
    spawnSync('podman', ['rmi', '--force', ...images, user], { stdio: 'ignore' });
    await registry.stop();
    registry.remove();
  });
  let agent: PodmanAgent | undefined;
  const folders: string[] = [];
  const kept: string[] = [];
  afterEach(() => {
    agent?.stop();
    agent = undefined;
    if (kept.length > 0) spawnSync('podman', ['rm', '--force', ...kept.splice(0)], { stdio: 'ignore' });
    spawnSync('podman', ['rmi', '--force', ...images, user], { stdio: 'ignore' });
    for (const f of folders.splice(0)) rmSync(f, { recursive: true, force: true });
  });

  const newFolder = () => {
    const folder = specFolder('ank-gc-');
    folders.push(folder);
    return folder;
  };

  /** Updates `current` to a workload of `image` and resolves once the new instance runs. */
  async function updateTo(a: PodmanAgent, current: WorkloadSpec, image: string): Promise<WorkloadSpec> {
    const next = fromRegistry(current.instanceName.workloadName, a.agentName, image);
    a.send({ kind: 'updateWorkload', added: [next], deleted: [{ instanceName: current.instanceName, dependencies: {} }] });
    await until(() => a.states.some((s) => s.instanceName.id === next.instanceName.id && s.executionState.state === 'Running'), 'the new one to run', 60_000);
    return next;
  }

  // rx~image-gc~1
  it("updates through four images leave only the one in use: the agent's old images go, a user's image and one a stopped container uses stay", async () => {
    const folder = newFolder();
    podman('pull', '--quiet', '--tls-verify=false', user);
    agent = new PodmanAgent(uniqueAgent('gc'), undefined, undefined, { imageGc: { high: 85, low: 80, minAgeMs: 0 }, folder });
    const first = fromRegistry('app', agent.agentName, images[0]);
    const users = fromRegistry('users', agent.agentName, user);
    agent.send({ kind: 'serverHello', added: [first, users] });
    await agent.waitFor('app', /^Running\(Ok\)$/);
    await agent.waitFor('users', /^Running\(Ok\)$/);
    let current = first;
    for (const image of images.slice(1)) {
      current = await updateTo(agent, current, image);
      // A container of someone else's, stopped, on the second image: that image stays.
      if (image === images[1]) {
        const name = `keep-${agent.agentName}`.replace(/_/g, '-');
        podman('create', '--name', name, image, 'true');
        kept.push(name);
      }
    }
    agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: users.instanceName, dependencies: {} }] });
    await until(() => !exists(images[0]) && !exists(images[2]), "the agent's unused images to go", 30_000);
    expect(exists(images[1]), 'the image a stopped container uses').to.equal(true);
    expect(exists(images[3]), 'the image in use').to.equal(true);
    expect(exists(user), "the user's image, though the agent's workload used it and is gone").to.equal(true);
    // The record is written once the engine's removal has returned, a moment after the image is gone.
    const recorded = () =>
      (JSON.parse(readFileSync(path.join(folder, 'images.podman.json'), 'utf8')) as { images: { image: string }[] }).images.map((r) => r.image).sort();
    await until(() => recorded().length <= 2, 'the record to be written', 10_000).catch(() => undefined);
    expect(recorded()).to.deep.equal([images[1], images[3]].sort());
  });

  // rx~image-gc~1
  it("a user's new image under a tag the agent once pulled is never removed: the agent forgets the tag", async () => {
    const folder = newFolder();
    agent = new PodmanAgent(uniqueAgent('gctag'), undefined, undefined, { imageGc: { high: 85, low: 80, minAgeMs: 0 }, folder });
    const first = fromRegistry('app', agent.agentName, images[0]);
    agent.send({ kind: 'serverHello', added: [first] });
    await agent.waitFor('app', /^Running\(Ok\)$/);
    // The user's own image now carries the tag the agent pulled (its container runs on by id).
    podman('pull', '--quiet', '--tls-verify=false', user);
    podman('tag', user, images[0]);
    const users = podman('image', 'inspect', '--format', '{{.Id}}', images[0]);
    await updateTo(agent, first, images[1]);
    const recorded = () => readFileSync(path.join(folder, 'images.podman.json'), 'utf8');
    await until(() => !recorded().includes(images[0]), 'the record to forget the tag', 30_000);
    expect(podman('image', 'inspect', '--format', '{{.Id}}', images[0]), "the user's image under the tag").to.equal(users);
  });

  // rx~image-gc-disk-guard~1
  it("a new workload's create, which pulls its image itself, waits while the image store's filesystem is above image_gc.high", async () => {
    const root = podman('info', '--format', '{{.Store.GraphRoot}}');
    const { blocks, bavail, bfree, bsize } = statfsSync(root);
    const used = blocks - bfree;
    const high = Math.round(((100 * used) / (used + bavail) + 0.3) * 100) / 100;
    const filler = path.join(path.dirname(root), `ank-gc-filler-${process.pid}`);
    try {
      execFileSync('fallocate', ['-l', String(Math.ceil(((high + 0.3) / 100) * (used + bavail) - used) * bsize), filler]);
      agent = new PodmanAgent(uniqueAgent('gcnew'), undefined, undefined, { imageGc: { high, low: high - 1, minAgeMs: 0 }, folder: newFolder() });
      agent.send({ kind: 'serverHello', added: [fromRegistry('app', agent.agentName, images[2])] });
      await agent.waitFor('app', /^Pending\(Starting\): Retry 1: Waiting for disk space/, 30_000);
      expect(exists(images[2]), 'nothing pulled meanwhile').to.equal(false);
      rmSync(filler);
      await agent.waitFor('app', /^Running\(Ok\)$/, 60_000);
    } finally {
      rmSync(filler, { force: true });
    }
  });

  // rx~image-gc~1
  it('the record survives a restart: the next agent removes what the earlier one pulled, once nothing uses it', async () => {
    const folder = newFolder();
    const name = uniqueAgent('gcre');
    const before = new PodmanAgent(name, undefined, undefined, { imageGc: { high: 85, low: 80, minAgeMs: 3_600_000 }, folder });
    agent = before;
    const w = fromRegistry('app', name, images[0]);
    before.send({ kind: 'serverHello', added: [w] });
    await before.waitFor('app', /^Running\(Ok\)$/);
    // Recorded once the create is done and the image it pulled is described.
    await until(() => existsSync(path.join(folder, 'images.podman.json')), 'the record', 10_000);
    before.stop();
    agent = new PodmanAgent(name, undefined, undefined, { imageGc: { high: 85, low: 80, minAgeMs: 0 }, folder });
    await until(() => !exists(images[0]), 'the image the earlier agent pulled to go', 30_000);
  });

  // rx~image-gc-disk-guard~1
  it("a pull ahead waits while the image store's filesystem is above image_gc.high, says so on the new instance with the old one running, and goes on once there is room", async () => {
    // The threshold just above how full the store's filesystem is now; a file allocated beside the store crosses it.
    const root = podman('info', '--format', '{{.Store.GraphRoot}}');
    const { blocks, bavail, bfree, bsize } = statfsSync(root);
    const used = blocks - bfree;
    const percent = (u: number) => (100 * u) / (u + bavail);
    const high = Math.round((percent(used) + 0.3) * 100) / 100;
    const filler = path.join(path.dirname(root), `ank-gc-filler-${process.pid}`);
    const name = uniqueAgent('gcfull');
    try {
      agent = new PodmanAgent(name, undefined, undefined, { imageGc: { high, low: high - 1, minAgeMs: 0 }, folder: newFolder(), pullAhead: true });
      const old = fromRegistry('app', name, images[0]);
      agent.send({ kind: 'serverHello', added: [old] });
      await agent.waitFor('app', /^Running\(Ok\)$/, 60_000);
      execFileSync('fallocate', ['-l', String(Math.ceil(((high + 0.3) / 100) * (used + bavail) - used) * bsize), filler]);
      const next = fromRegistry('app', name, images[1]);
      agent.send({ kind: 'updateWorkload', added: [next], deleted: [{ instanceName: old.instanceName, dependencies: {} }] });
      const waiting = () =>
        agent!.states.find((s) => s.instanceName.id === next.instanceName.id && /Waiting for disk space/.test(s.executionState.additionalInfo))?.executionState;
      await until(() => waiting() !== undefined, 'the new instance to say it waits for room', 30_000);
      expect(waiting()?.additionalInfo).to.match(
        new RegExp(`^Retry \\d+: Waiting for disk space: the image store's filesystem \\(${root}\\) is \\d+ % full, above ${high} % \\(image_gc.high\\)`),
      );
      expect(
        agent.history('app').some((h) => h.startsWith('Stopping')),
        'the old instance runs on',
      ).to.equal(false);
      rmSync(filler);
      await until(
        () => agent!.states.some((s) => s.instanceName.id === next.instanceName.id && s.executionState.state === 'Running'),
        'the new one to run',
        60_000,
      );
    } finally {
      rmSync(filler, { force: true });
    }
  });

  // rx~image-gc~1
  it('a podman-kube and a containerd workload too: updated to a new image, the old one the agent pulled goes', async () => {
    try {
      execFileSync('nerdctl', ['version'], { stdio: 'ignore' });
    } catch {
      throw new Error('nerdctl and containerd are missing: run scripts/setup-containerd.sh (scripts/setup-tests.sh runs it)');
    }
    const name = uniqueAgent('gcfam');
    agent = new PodmanAgent(name, undefined, undefined, { imageGc: { high: 85, low: 80, minAgeMs: 0 }, folder: newFolder(), pullAhead: true });
    const pod = `${name.replace(/_/g, '-')}-web`;
    const kube = (image: string) => kubePod('kube', name, pod, [{ name: 'c', image }], { extra: 'playOptions: ["--tls-verify=false"]' });
    const ctrd = (image: string) =>
      spec(
        'ctrd',
        name,
        'containerd',
        `image: ${image}\ngeneralOptions: ["--insecure-registry"]\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(SLEEP_UNTIL_STOPPED)}]\n`,
      );
    const ctrdHas = (image: string) => spawnSync('nerdctl', ['image', 'inspect', image], { stdio: 'ignore' }).status === 0;
    try {
      const [kubeOld, ctrdOld] = [kube(images[0]), ctrd(images[0])];
      agent.send({ kind: 'serverHello', added: [kubeOld, ctrdOld] });
      await agent.waitFor('kube', /^Running\(Ok\)$/, 60_000);
      await agent.waitFor('ctrd', /^Running\(Ok\)$/, 60_000);
      const [kubeNew, ctrdNew] = [kube(images[1]), ctrd(images[1])];
      agent.send({
        kind: 'updateWorkload',
        added: [kubeNew, ctrdNew],
        deleted: [kubeOld, ctrdOld].map((w) => ({ instanceName: w.instanceName, dependencies: {} })),
      });
      for (const next of [kubeNew, ctrdNew])
        await until(() => agent!.states.some((s) => s.instanceName.id === next.instanceName.id && s.executionState.state === 'Running'), 'the new one', 60_000);
      await until(() => !exists(images[0]) && !ctrdHas(images[0]), 'the old image to go from Podman and from containerd', 30_000);
      expect(exists(images[1]) && ctrdHas(images[1]), 'the images in use').to.equal(true);
    } finally {
      agent?.stop();
      agent = undefined;
      spawnSync('nerdctl', ['rmi', '--force', ...images], { stdio: 'ignore' });
    }
  });

  /** The names an image has now. */
  const namesOf = (image: string) => JSON.parse(podman('image', 'inspect', '--format', '{{json .RepoTags}}', image)) as string[];
  const held = (image: string) => exists(image) && namesOf(image).some((n) => n.startsWith(`${HOLD_REPOSITORY}:`));

  // rx~image-gc~1
  it("a user's pull of the image at the same moment as the agent's makes it no image of the agent's: it stays after the workload is deleted", async () => {
    const folder = newFolder();
    // The user's pull of the image ends just before each call of the agent's that would fetch it.
    const wrapper = path.join(newFolder(), 'podman');
    writeFileSync(
      wrapper,
      `#!/bin/sh\ncase " $* " in *" run "*|*" pull "*) podman pull --quiet --tls-verify=false ${images[2]} >/dev/null 2>&1;; esac\nexec podman "$@"\n`,
      { mode: 0o755 },
    );
    agent = new PodmanAgent(uniqueAgent('gcsame'), undefined, harnessCli(wrapper), { imageGc: { high: 85, low: 80, minAgeMs: 0 }, folder });
    const w = fromRegistry('app', agent.agentName, images[2]);
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('app', /^Running\(Ok\)$/, 60_000);
    agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: w.instanceName, dependencies: {} }] });
    await agent.waitFor('app', /^Removed$/);
    // The collector runs every second while its record holds an image: two collections go by.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(exists(images[2]), "the user's image").to.equal(true);
    const record = path.join(folder, 'images.podman.json');
    expect(existsSync(record) ? readFileSync(record, 'utf8') : '', 'the record').not.to.include(images[2]);
  });

  // rx~image-gc~1, rx~pull-ahead-waiting~1
  it("two agents on one image store: an image agent A pulled is kept while agent B's workload waits for it, and B's workload starts with the registry gone", async () => {
    const gc = { high: 85, low: 80, minAgeMs: 0 };
    const a = new PodmanAgent(uniqueAgent('gca'), undefined, undefined, { imageGc: gc, folder: newFolder() });
    const b = new PodmanAgent(uniqueAgent('gcb'), undefined, undefined, { imageGc: gc, folder: newFolder(), pullAhead: true });
    try {
      const first = fromRegistry('app', a.agentName, images[1]);
      a.send({ kind: 'serverHello', added: [first] });
      await a.waitFor('app', /^Running\(Ok\)$/, 60_000);
      // B's workload waits for a dependency that is not there yet; its image is pulled ahead meanwhile: it is there.
      const waiting: WorkloadSpec = { ...fromRegistry('late', b.agentName, images[1]), dependencies: { gate: 'Running' } };
      b.send({ kind: 'serverHello', added: [waiting] });
      await until(() => held(images[1]), "B's hold on the image", 30_000);
      a.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: first.instanceName, dependencies: {} }] });
      await a.waitFor('app', /^Removed$/);
      await registry.stop();
      // A's collector runs every second while its record holds the image: two collections go by.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(exists(images[1]), 'the image B waits for').to.equal(true);
      b.send({ kind: 'updateWorkload', added: [busybox('gate', b.agentName)], deleted: [] });
      await b.waitFor('late', /^Running\(Ok\)$/, 30_000);
      await until(() => !held(images[1]), 'B to let go of its hold once its container keeps the image', 10_000);
    } finally {
      a.stop();
      b.stop();
      await registry.start();
    }
  });
});
