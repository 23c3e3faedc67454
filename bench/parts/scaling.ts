// Bench part: Scaling: hundreds of workloads on a file-backed fake podman (bench/fake-podman.mjs).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FakeAnkaiosServer, addedWorkload } from '../../scripts/harness/fake-server.js';
import { record, sleep } from '../report.js';
import { busybox, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { until, cpuTicks, idleFigures, writeBaseline, SETTLE_MS, latestStates } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

export async function benchScaling(idleSeconds: number): Promise<void> {
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  console.log(
    `\n9. Scaling (the real agent process${released ? ', then the released one' : ''}, a fake podman that keeps containers as files; ` +
      `settled ${SETTLE_MS / 1000} s, then idle ${idleSeconds} s)`,
  );
  const run = specFolder('ank-bench-scale-');
  const server0 = await FakeAnkaiosServer.start();
  const floor = spawn(process.execPath, [writeBaseline(run), `127.0.0.1:${server0.port}`], { stdio: 'ignore' });
  await (await server0.nextStream()).waitFor(() => true);
  await sleep(2000);
  const floorRss = (await idleFigures(floor.pid!, Math.min(idleSeconds, 10))).rss;
  floor.kill('SIGKILL');
  server0.stop();
  record({ name: 'floor: Node + gRPC client, idle RSS, median', value: floorRss, unit: 'MiB' });
  const ours = await scaleAgent('ours', (url, name, env) => spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), {
    idleSeconds,
    floorRss,
  });
  record({ name: 'ours: idle RSS with no workload / floor', value: ours.get(0)!.rss / floorRss, unit: '×', target: '≤1.15' });
  if (released)
    await scaleAgent('released', (url, name, env) => spawn(released, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), { idleSeconds });
}

/** One agent at 0 / 50 / 500 / 1 000 workloads on the fake podman: idle figures, and the times of the bursts. */
async function scaleAgent(
  label: string,
  start: (url: string, name: string, env: NodeJS.ProcessEnv) => ChildProcess,
  { idleSeconds, floorRss }: { idleSeconds: number; floorRss?: number },
): Promise<Map<number, { rss: number; cpu: number }>> {
  const byN = new Map<number, { rss: number; cpu: number }>();
  for (const n of [0, 50, 500, 1000]) {
    const fake = specFolder('ank-fake-podman-');
    symlinkSync(path.resolve('bench/fake-podman.mjs'), path.join(fake, 'podman'));
    const state = path.join(fake, 'containers');
    execFileSync('mkdir', [state]);
    const env = { ...process.env, PATH: `${fake}:${process.env.PATH ?? ''}`, FAKE_PODMAN_DIR: state };
    const agentName = uniqueAgent('scale');
    const server = await FakeAnkaiosServer.start();
    const child = start(server.url, agentName, env);
    try {
      const stream = await server.nextStream();
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      const latest = latestStates(stream);
      const specs = Array.from({ length: n }, (_, i) => busybox(`w${i}`, agentName));
      const t = performance.now();
      const ticks = cpuTicks(child.pid!);
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
      await until(() => specs.every((s) => latest.get(s.instanceName.workloadName) === 'Running(Ok)'), 300_000);
      if (n >= 100) {
        const ms = performance.now() - t;
        record({ name: `${label}: ServerHello → ${n} workloads Running(Ok) at the server`, value: ms, unit: 'ms', note: `${(ms / n).toFixed(1)} ms each` });
        record({ name: `${label}: agent CPU for the burst of ${n} creates`, value: (cpuTicks(child.pid!) - ticks) / 100, unit: 's' });
      }
      await sleep(SETTLE_MS);
      const containers = readdirSync(state).length;
      writeFileSync(path.join(fake, 'calls'), '');
      const figures = await idleFigures(child.pid!, idleSeconds);
      const calls = readFileSync(path.join(fake, 'calls'), 'utf8').length / idleSeconds;
      byN.set(n, figures);
      const rssTarget = n === 0 && floorRss ? `≤${(1.15 * floorRss).toFixed(1)} (1.15 × floor)` : undefined;
      record({ name: `${label}: idle RSS with ${n} workloads, median`, value: figures.rss, unit: 'MiB', target: rssTarget });
      record({ name: `${label}: idle CPU with ${n} workloads`, value: figures.cpu, unit: '% core', target: n === 1000 && floorRss ? '≤0.5' : undefined });
      record({ name: `${label}: podman calls per second with ${n} workloads`, value: calls, unit: '/s', note: `${containers} containers` });
      if (n >= 100) {
        const t2 = performance.now();
        stream.send({
          FromServerEnum: { case: 'updateWorkload', value: { deletedWorkloads: specs.map((s) => ({ instanceName: s.instanceName, dependencies: {} })) } },
        });
        await until(() => specs.every((s) => latest.get(s.instanceName.workloadName) === 'Removed'), 300_000);
        record({ name: `${label}: delete all → ${n} workloads Removed at the server`, value: performance.now() - t2, unit: 'ms' });
      }
    } finally {
      child.kill('SIGKILL');
      server.stop();
    }
  }
  const rss = (n: number) => byN.get(n)!.rss;
  for (const [from, to] of [
    [50, 500],
    [500, 1000],
    [50, 1000],
  ]) {
    const target = floorRss ? '≤0.05' : undefined;
    record({ name: `${label}: RSS per idle workload, ${from} → ${to}`, value: (rss(to) - rss(from)) / (to - from), unit: 'MiB', target });
  }
  return byN;
}
