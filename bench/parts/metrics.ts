// Bench part: The metrics endpoint: what it costs idle, and one scrape of 1 000 workloads.
import { spawn } from 'node:child_process';
import { STATS_TTL_MS } from '../../lib/drivers/metrics.js';
import { FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { record, sleep } from '../report.js';
import { uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { cpuTicks, idleFigures, fakePodmanWithLogs, settledAgent } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

export async function benchMetrics(idleSeconds: number): Promise<void> {
  console.log(`\n12. Metrics endpoint (the real agent process on the fake podman; idle ${idleSeconds} s)`);
  const run = specFolder('ank-bench-metrics-');
  const idle = async (args: string[]) => {
    const server = await FakeAnkaiosServer.start();
    const child = spawn(BIN, ['-n', uniqueAgent('mx'), '-s', server.url, '-k', '-r', run, ...args], {
      stdio: 'ignore',
      env: fakePodmanWithLogs(),
    });
    try {
      await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
      await sleep(3000);
      return await idleFigures(child.pid!, idleSeconds);
    } finally {
      child.kill('SIGKILL');
      server.stop();
    }
  };
  const port = 19_000 + (process.pid % 1000);
  const without = await idle([]);
  const withIt = await idle(['--metrics', String(port)]);
  record({ name: 'idle RSS without --metrics', value: without.rss, unit: 'MiB' });
  record({ name: 'idle RSS with --metrics (never scraped)', value: withIt.rss, unit: 'MiB' });
  record({
    name: 'idle CPU without / with --metrics',
    value: withIt.cpu - without.cpu,
    unit: '% core',
    note: `${without.cpu.toFixed(2)} / ${withIt.cpu.toFixed(2)}`,
  });
  // One scrape of an agent with 1 000 workloads.
  const { pid, stop } = await settledAgent('mx', 1000, ['--metrics', String(port)]);
  try {
    const scrape = async () => {
      const ticks = cpuTicks(pid);
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return { cpuMs: (cpuTicks(pid) - ticks) * 10, bytes: text.length };
    };
    const first = await scrape();
    await sleep(STATS_TTL_MS + 500);
    // Ticks are 10 ms: the mean of 20 scrapes in a row, one at a time.
    const next: Array<{ cpuMs: number; bytes: number }> = [];
    for (let i = 0; i < 20; i++) next.push(await scrape());
    record({
      name: 'one scrape of 1 000 workloads (the first, prom-client loaded before), agent CPU',
      value: first.cpuMs,
      unit: 'ms',
      note: `${first.bytes} bytes`,
    });
    record({
      name: 'one scrape of 1 000 workloads, agent CPU, mean of 20',
      value: next.reduce((sum, n) => sum + n.cpuMs, 0) / next.length,
      unit: 'ms',
      target: '≤50',
    });
  } finally {
    stop();
  }
}
