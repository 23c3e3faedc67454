// 20. Updates that pull (Debian's docker-registry on loopback, ANKAIOS_BIN): under the released server and CLI,
// ours and the released agent in turn. The downtime of an update of a busybox httpd to an image of 40 MiB that
// must be pulled (the last answer of the old → the first of the new), beside ours with the image present; and a
// chain of three workloads, each waiting on the one before and each with an image to pull: apply → the last runs.
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { Cluster, Proc, manifest } from '../spec/ankaios/released.js';
import { BIN } from '../spec/helpers/end-to-end.js';
import { IMAGE, SLEEP_UNTIL_STOPPED } from '../spec/helpers/podman.js';
import { Registry } from '../spec/helpers/registry.js';
import { after, ankNoWait, fetchBody, webYaml } from './e2e.js';
import { median, record, sleep } from './report.js';
import { spawn } from 'node:child_process';

const NO_TLS = ['--tls-verify=false'];
const removeImages = (...images: string[]) => spawnSync('podman', ['rmi', '--force', ...images], { stdio: 'ignore' });

/** From the last answer of the old content to the first of the new, while `update` runs. */
async function downtime(port: number, update: () => void): Promise<number> {
  let lastOld = performance.now();
  update();
  for (;;) {
    const body = await fetchBody(port);
    if (body === 'v2') return performance.now() - lastOld;
    if (body === 'v1') lastOld = performance.now();
    await sleep(2);
  }
}

async function updateDowntime(cluster: Cluster, agent: string, port: number, image: string, pull: boolean): Promise<number> {
  const file = (content: string, img: string, options: string[]) =>
    cluster.file(`pull-${agent}-${content}-${port}.yaml`, manifest(webYaml('web', agent, port, content, img, options)));
  if (pull) removeImages(image);
  else spawnSync('podman', ['pull', '--quiet', ...NO_TLS, image], { stdio: 'ignore' });
  ankNoWait(cluster, 'apply', file('v1', IMAGE, []));
  await after(performance.now(), async () => (await fetchBody(port)) === 'v1', 5, 60_000);
  await cluster.waitFor('web', 'Running(Ok)');
  const gap = await downtime(port, () => ankNoWait(cluster, 'apply', file('v2', image, NO_TLS)));
  await cluster.waitFor('web', 'Running(Ok)');
  ankNoWait(cluster, 'delete', 'workload', 'web');
  await cluster.until(async () => (await cluster.states()).every((s) => s.workload !== 'web'), 'web to go');
  return gap;
}

async function chain(cluster: Cluster, agent: string, images: readonly string[]): Promise<number> {
  removeImages(...images);
  const link = (i: number) => `  c${i}:
    runtime: podman
    agent: ${agent}
${i > 0 ? `    dependencies:\n      c${i - 1}: ADD_COND_RUNNING\n` : ''}    runtimeConfig: |
      image: ${images[i]}
      commandOptions: ${JSON.stringify(['--stop-timeout', '1', ...NO_TLS])}
      commandArgs: ["/bin/sh", "-c", ${JSON.stringify(SLEEP_UNTIL_STOPPED)}]
`;
  const t = performance.now();
  ankNoWait(cluster, 'apply', cluster.file(`chain-${agent}-${Date.now()}.yaml`, manifest(...images.map((_, i) => link(i)))));
  await cluster.waitFor(`c${images.length - 1}`, 'Running(Ok)', 300_000);
  const took = performance.now() - t;
  ankNoWait(cluster, 'delete', 'workload', ...images.map((_, i) => `c${i}`));
  await cluster.until(async () => (await cluster.states()).every((s) => !/^c\d$/.test(s.workload)), 'the chain to go');
  return took;
}

export async function benchPulls(rounds: number): Promise<void> {
  console.log(`\n20. Updates that pull, under the released server (a registry on loopback), ${rounds} rounds each`);
  const registry = new Registry();
  const cluster = new Cluster();
  try {
    await registry.start();
    const big = registry.pushBig('web:v2', 40, IMAGE);
    const links = [1, 2, 3].map((i) => registry.pushBig(`link${i}:v1`, 40, IMAGE));
    await cluster.startServer();
    cluster.ourAgent = new Proc(spawn(BIN, ['-n', cluster.ours, '-s', cluster.url, '-k', '-r', cluster.runFolder('ours')]));
    cluster.startTheirs();
    await cluster.until(async () => (await cluster.agents()).length === 2, 'both agents to connect');
    const gaps = { ours: [] as number[], oursPresent: [] as number[], released: [] as number[] };
    const chains = { ours: [] as number[], released: [] as number[] };
    let port = 18_400;
    for (let round = 0; round < rounds; round++) {
      gaps.ours.push(await updateDowntime(cluster, cluster.ours, port++, big, true));
      gaps.oursPresent.push(await updateDowntime(cluster, cluster.ours, port++, big, false));
      gaps.released.push(await updateDowntime(cluster, cluster.theirs, port++, big, true));
      chains.ours.push(await chain(cluster, cluster.ours, links));
      chains.released.push(await chain(cluster, cluster.theirs, links));
    }
    const [pulled, present, released] = [median(gaps.ours), median(gaps.oursPresent), median(gaps.released)];
    record({ name: 'update downtime, image present: ours', value: present, unit: 'ms' });
    record({ name: 'update downtime, image pulled (40 MiB): released agent', value: released, unit: 'ms' });
    record({
      name: 'update downtime, image pulled (40 MiB): ours',
      value: pulled,
      unit: 'ms',
      target: `≤${(1.1 * present).toFixed(0)} (1.1 × present)`,
      note: `${(pulled / present).toFixed(2)} × present`,
    });
    const [ours, theirs] = [median(chains.ours), median(chains.released)];
    record({ name: 'chain of 3, each pulls 40 MiB: apply → last running: released', value: theirs / 1000, unit: 's' });
    record({
      name: 'chain of 3, each pulls 40 MiB: apply → last running: ours',
      value: ours / 1000,
      unit: 's',
      target: `≤${((0.6 * theirs) / 1000).toFixed(2)} (0.6 × released)`,
      note: `${(ours / theirs).toFixed(2)} ×`,
    });
  } finally {
    await cluster.stopAll();
    await registry.stop();
    registry.remove();
  }
}
