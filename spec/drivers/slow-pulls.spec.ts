// Pulls over a slow link and from a registry that stalls: real registry behind a throttling proxy on loopback,
// real Podman. A slow download finishes; one that makes no progress ends, leaves no partial download behind,
// and holds up no pull from another registry.
import { spawnSync } from 'node:child_process';
import { readdirSync as listFolder } from 'node:fs';
import { expect } from 'chai';
import { lastValueFrom, tap, toArray } from 'rxjs';
import { ImagePulls, registryOf } from '../../lib/runtimes/containers/image-pulls.js';
import { podmanImagePull } from '../../lib/runtimes/podman/images.js';
import { PARTIAL_DOWNLOADS } from '../../lib/runtimes/podman/index.js';
import { parseContainerConfig } from '../../lib/runtimes/containers/run-config.js';
import { IMAGE, PodmanAgent, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { Registry, SlowProxy, hasRegistry } from '../../scripts/harness/registry.js';
import { until } from '../../scripts/harness/wait.js';
import { harnessCli } from '../../scripts/harness/processes.js';
import { PodmanCli } from '../../lib/runtimes/podman/podman-cli.js';

/** Podman's folders of partial downloads. */
const downloads = () => listFolder('/var/tmp').filter((name) => /^storage\d+$/.test(name));
/** The image's reference through the proxy. */
const via = (image: string, registry: Registry, proxy: SlowProxy) => image.replace(`:${registry.port}/`, `:${proxy.port}/`);
const pullOf = (image: string, more: string[] = []) =>
  podmanImagePull(parseContainerConfig(`image: ${image}\ncommandOptions: ${JSON.stringify(['--tls-verify=false', ...more])}`));

describe('slow and stalled pulls (real registry behind a proxy, real Podman)', function () {
  this.timeout(120_000);
  const registry = new Registry();
  let image = '';
  const proxies: SlowProxy[] = [];
  const proxy = async (o: ConstructorParameters<typeof SlowProxy>[1]) => {
    const made = await new SlowProxy(registry.port, o).start();
    proxies.push(made);
    return made;
  };
  before(async function () {
    requirePodman();
    if (!hasRegistry()) this.skip();
    await registry.start();
    image = registry.pushBig('slow:v1', 2, IMAGE);
  });
  after(async () => {
    await registry.stop();
    registry.remove();
  });
  afterEach(async () => {
    for (const p of proxies.splice(0)) await p.stop();
    spawnSync('sh', ['-c', `podman images --format '{{.Repository}}:{{.Tag}}' | grep '/slow:v1$' | xargs -r podman rmi --force`], { stdio: 'ignore' });
  });

  // swdd~podman-create-workload-runs-workload~2
  it('a new workload whose image takes longer to download than a command may take runs once the download is done', async () => {
    const slow = await proxy({ bytesPerSecond: 256 * 1024 });
    // Commands may take 3 s here; the download takes about 8.
    const agent = new PodmanAgent(uniqueAgent('slow'), undefined, harnessCli('podman', { deadlines: { query: 10_000, command: 3000 } }));
    try {
      const w = spec(
        'slow',
        agent.agentName,
        'podman',
        `image: ${via(image, registry, slow)}\ncommandOptions: ["--stop-timeout", "1", "--tls-verify=false"]\ncommandArgs: ["/bin/sleep", "3600"]\n`,
      );
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('slow', /^Running\(Ok\)$/, 60_000);
      expect(agent.history('slow')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
    } finally {
      agent.stop();
    }
  });

  // rx~pull-ahead~1
  it('a pull that makes no progress is ended, its partial download removed; a pull from another registry goes on meanwhile, one more from the stalled one says it waits for a slot', async () => {
    const stalled = await proxy({ stallAfter: 256 * 1024 });
    const before = downloads();
    const pulls = new ImagePulls(new PodmanCli(harnessCli('podman', { leftovers: PARTIAL_DOWNLOADS })), { deadlineMs: 60_000, stallMs: 2000 });
    const stalledImage = via(image, registry, stalled);
    expect(registryOf(stalledImage)).not.to.equal(registryOf(image));
    // Both slots of the stalled registry held (two pulls of the image, told apart by an option).
    const stuck = [[], ['--platform=linux/amd64']].map((more) =>
      lastValueFrom(pulls.ensure(pullOf(stalledImage, more)).pipe(toArray())).catch((e: Error) => e),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const started = performance.now();
    await lastValueFrom(pulls.ensure(pullOf(image)).pipe(toArray()));
    expect(performance.now() - started, 'the other registry waits for no stalled pull').to.be.below(2000);
    // A third pull from the stalled registry waits for a slot, and says so first.
    const notes: string[] = [];
    const third = lastValueFrom(pulls.ensure(pullOf(stalledImage, ['--arch=amd64'])).pipe(tap((note) => notes.push(note)))).catch((e: Error) => e);
    const [first] = await Promise.all(stuck);
    // It then gets a slot (what it needs of the layers the other registry's pull brought, it has already).
    await third;
    expect(notes).to.deep.equal([`Waiting for a pull slot: 2 pulls from ${registryOf(stalledImage)} are under way`]);
    expect(String(first)).to.match(/^Error: podman pull made no progress for 2 s and was killed\.$/);
    // Removed once the killed pulls have ended.
    await until(() => downloads().every((d) => before.includes(d)), 'the partial downloads to be removed', 5000);
  });
});
