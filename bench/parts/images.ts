// Bench part: images that do not pile up. A workload updated through `n` images of a local registry (each its
// own 1 MiB layer), by our agent with its collector (min_age = 0: an image may go as soon as nothing uses it)
// and without it, and by the released agent beside (ANKAIOS_BIN): how many of the images stay in the store,
// and what the collection costs the agent and Podman.
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { BIN } from '../../scripts/harness/agent.js';
import { IMAGE, cleanup, podman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { Registry } from '../../scripts/harness/registry.js';
import { cpuMs, podmanServiceCpuMs, record, sleep } from '../report.js';
import { until } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

const workload = (agentName: string, image: string) =>
  spec(
    'app',
    agentName,
    'podman',
    `image: ${image}\ncommandOptions: ["--stop-timeout", "1", "--tls-verify=false"]\ncommandArgs: ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]\n`,
  );

/** `n` images of their own layer each, pushed to the registry (made by `podman import` of a tar: no container run). */
function makeImages(registry: Registry, n: number, folder: string): string[] {
  const base = podman('image', 'mount', IMAGE);
  try {
    return Array.from({ length: n }, (_, i) => {
      const tar = path.join(folder, `layer${i}.tar`);
      writeFileSync(path.join(folder, 'blob'), Buffer.from(Array.from({ length: 1 << 20 }, () => Math.floor(Math.random() * 256))));
      spawnSync('tar', ['-cf', tar, '-C', base, '.', '-C', folder, 'blob']);
      const local = `localhost/ank-bench-images:v${i}`;
      podman('import', '--quiet', '--change', 'CMD ["/bin/sh"]', tar, local);
      const remote = registry.push(local, `bench-images:v${i}`);
      spawnSync('podman', ['rmi', '--force', local], { stdio: 'ignore' });
      return remote;
    });
  } finally {
    spawnSync('podman', ['image', 'unmount', IMAGE], { stdio: 'ignore' });
  }
}

const present = (images: readonly string[]) => images.filter((image) => spawnSync('podman', ['image', 'exists', image]).status === 0).length;

interface Run {
  /** Of the images, how many were in the store after each update. */
  readonly kept: number[];
  /** The agent's and Podman's CPU over the run (ms), and how long it took (ms). */
  readonly cpuMs: number;
  readonly wallMs: number;
}

async function updates(label: string, images: readonly string[], start: (url: string, name: string, run: string) => ReturnType<typeof spawn>): Promise<Run> {
  const name = uniqueAgent('images');
  const run = specFolder('ank-bench-images-');
  const server = await FakeAnkaiosServer.start();
  const child = start(server.url, name, run);
  try {
    const stream = await server.nextStream();
    await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    let current = workload(name, images[0]);
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(current)] } } });
    const runs = (w: typeof current) => reportedStates(stream).some(([n, id, st]) => n === 'app' && id === w.instanceName.id && st === 'Running(Ok)');
    await until(() => runs(current), 120_000);
    const io = path.join(run, `${name}_io`);
    const cpu = () => {
      const c = cpuMs(child.pid!);
      return c.own + c.children + podmanServiceCpuMs(io);
    };
    const before = cpu();
    const t = performance.now();
    const kept: number[] = [];
    for (const image of images.slice(1)) {
      const next = workload(name, image);
      stream.send({
        FromServerEnum: {
          case: 'updateWorkload',
          value: { addedWorkloads: [addedWorkload(next)], deletedWorkloads: [{ instanceName: current.instanceName, dependencies: {} }] },
        },
      });
      await until(() => runs(next), 120_000);
      current = next;
      // A second for the collector's next look (it looks every second with min_age = 0).
      await sleep(1500);
      kept.push(present(images));
    }
    const result = { kept, cpuMs: cpu() - before, wallMs: performance.now() - t };
    console.log(`  ${label}: images in the store after each update: ${kept.join(' ')}`);
    return result;
  } finally {
    child.kill('SIGKILL');
    server.stop();
    cleanup(name);
    spawnSync('podman', ['rmi', '--force', ...images], { stdio: 'ignore' });
  }
}

export async function benchImages(n: number): Promise<void> {
  console.log(`\n22. Images that do not pile up: a workload updated through ${n} images of a local registry`);
  const folder = specFolder('ank-bench-images-');
  const registry = new Registry();
  await registry.start();
  try {
    const images = makeImages(registry, n, folder);
    const config = (gc: string) => {
      const file = path.join(folder, `${gc === 'false' ? 'off' : 'on'}.toml`);
      writeFileSync(file, `version = 'v1'\nimage_gc = ${gc}\n`);
      return file;
    };
    const ours = (gc: string) => (url: string, name: string, run: string) =>
      spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run, '-x', config(gc)], { stdio: 'ignore' });
    const on = await updates('ours, image_gc = { min_age = 0 }', images, ours('{ min_age = 0 }'));
    const off = await updates('ours, image_gc = false', images, ours('false'));
    const most = Math.max(...on.kept);
    record({
      name: `${n} updates: images of the ${n} in the store, at most (ours)`,
      value: most,
      unit: 'images',
      target: `≤${on.kept[0] + 1} (within one image of after the first update)`,
    });
    record({ name: `${n} updates: images in the store at the end, without collection (ours, image_gc = false)`, value: off.kept.at(-1)!, unit: 'images' });
    const released = process.env.ANKAIOS_BIN;
    if (released) {
      const theirs = await updates('released agent', images, (url, name, run) =>
        spawn(path.join(released, 'ank-agent'), ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore' }),
      );
      record({ name: `${n} updates: images in the store at the end (released agent)`, value: theirs.kept.at(-1)!, unit: 'images' });
    }
    const share = (100 * (on.cpuMs - off.cpuMs)) / on.wallMs;
    record({
      name: 'the collection: agent + Podman CPU, share of a core over the run',
      value: share,
      unit: '% core',
      target: '<1',
      note: `${(on.cpuMs / 1000).toFixed(2)} s with it, ${(off.cpuMs / 1000).toFixed(2)} s without, over ${(on.wallMs / 1000).toFixed(0)} s`,
    });
  } finally {
    await registry.stop();
    registry.remove();
  }
}
