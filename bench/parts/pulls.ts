// Updates that pull (Debian's docker-registry on loopback, ANKAIOS_BIN): under the released server and CLI,
// ours and the released agent in turn. The downtime of an update of a busybox httpd to an image of 40 MiB that
// must be pulled (the last answer of the old → the first of the new), beside ours with the image present; and a
// chain of three workloads, each waiting on the one before and each with an image to pull: apply → the last runs.
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { Cluster, Proc, manifest } from '../../scripts/harness/ankaios.js';
import { BIN } from '../../scripts/harness/agent.js';
import { IMAGE, SLEEP_UNTIL_STOPPED } from '../../scripts/harness/podman.js';
import { Registry } from '../../scripts/harness/registry.js';
import { after, ankNoWait, fetchBody, webYaml } from './e2e.js';
import { beside, median, record, sleep } from '../report.js';
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
  else {
    // Present and settled: on disk, as an image pulled long before is.
    spawnSync('podman', ['pull', '--quiet', ...NO_TLS, image], { stdio: 'ignore' });
    spawnSync('sync');
  }
  ankNoWait(cluster, 'apply', file('v1', IMAGE, []));
  await after(performance.now(), async () => (await fetchBody(port)) === 'v1', 5, 60_000);
  await cluster.waitFor('web', 'Running(Ok)');
  const gap = await downtime(port, () => ankNoWait(cluster, 'apply', file('v2', image, NO_TLS)));
  await cluster.waitFor('web', 'Running(Ok)');
  ankNoWait(cluster, 'delete', 'workload', 'web');
  await cluster.until(async () => (await cluster.states()).every((s) => s.workload !== 'web'), 'web to go');
  return gap;
}

/** `others`: the same images under other names (through another port), removed too, so that no layer is there. */
async function chain(cluster: Cluster, agent: string, images: readonly string[], others: readonly string[] = []): Promise<number> {
  removeImages(...images, ...others);
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

/** Bytes a second each connection through the slow link may carry (a high-latency link bounds each TCP flow so). */
const SLOW_LINK_BYTES_PER_SECOND = 8 * 2 ** 20;

/**
 * A TCP proxy in front of the registry that carries each connection's downloads at SLOW_LINK_BYTES_PER_SECOND:
 * a link whose round trips, not its total bandwidth, bound what each flow gets. Resolves with its port.
 */
async function slowLink(to: number): Promise<{ port: number; close: () => void }> {
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: to });
    client.pipe(upstream);
    let due = performance.now();
    upstream.on('data', (chunk: Buffer) => {
      upstream.pause();
      due = Math.max(due, performance.now()) + (chunk.length / SLOW_LINK_BYTES_PER_SECOND) * 1000;
      setTimeout(() => {
        client.write(chunk);
        upstream.resume();
      }, due - performance.now());
    });
    upstream.on('end', () => setTimeout(() => client.end(), Math.max(0, due - performance.now())));
    const both = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', both);
    upstream.on('error', both);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
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
    const slowChains = { ours: [] as number[], released: [] as number[] };
    const link = await slowLink(registry.port);
    const slowLinks = links.map((image) => image.replace(`127.0.0.1:${registry.port}/`, `127.0.0.1:${link.port}/`));
    let port = 18_400;
    for (let round = 0; round < rounds; round++) {
      gaps.ours.push(await updateDowntime(cluster, cluster.ours, port++, big, true));
      gaps.oursPresent.push(await updateDowntime(cluster, cluster.ours, port++, big, false));
      gaps.released.push(await updateDowntime(cluster, cluster.theirs, port++, big, true));
      chains.ours.push(await chain(cluster, cluster.ours, links, slowLinks));
      chains.released.push(await chain(cluster, cluster.theirs, links, slowLinks));
      slowChains.ours.push(await chain(cluster, cluster.ours, slowLinks, links));
      slowChains.released.push(await chain(cluster, cluster.theirs, slowLinks, links));
    }
    link.close();
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
    beside('chain of 3, each pulls 40 MiB: apply → last running', 's', median(chains.ours) / 1000, median(chains.released) / 1000, 0.6);
    const perFlow = `${SLOW_LINK_BYTES_PER_SECOND / 2 ** 20} MiB/s a connection`;
    beside(`the same chain over a slow link (${perFlow})`, 's', median(slowChains.ours) / 1000, median(slowChains.released) / 1000, 0.6);
  } finally {
    await cluster.stopAll();
    await registry.stop();
    registry.remove();
  }
}
