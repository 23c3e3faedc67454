// npm run bench: the parts in bench/parts/, one module each, loaded only when run. `--only=a,b` picks parts
// (`soak` runs only when named), `--quick` shortens them. Prints a table and writes bench/results.json.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { figures } from './report.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const value = (flag: string) => args.find((a) => a.startsWith(`--${flag}=`))?.slice(flag.length + 3);
const only = value('only')?.split(',');
const soakMinutes = Number(value('soak-minutes') ?? (quick ? 10 : 60));
const released = process.env.ANKAIOS_BIN;

/** A part: what it needs (Podman; the released Ankaios in ANKAIOS_BIN), and how it runs. */
interface Part {
  readonly name: string;
  readonly podman?: boolean;
  readonly ankaios?: boolean;
  /** Run only when --only names it. */
  readonly named?: boolean;
  readonly run: () => Promise<void>;
}

const PARTS: readonly Part[] = [
  { name: 'scheduling', run: async () => (await import('./parts/scheduling.js')).benchScheduling() },
  { name: 'economy', podman: true, run: async () => (await import('./parts/economy.js')).benchEconomy(quick ? 5 : 20) },
  { name: 'latency', podman: true, run: async () => (await import('./parts/latency.js')).benchLatency() },
  { name: 'overhead', run: async () => (await import('./parts/overhead.js')).benchOverhead(quick ? 10 : 60) },
  { name: 'ci', run: async () => (await import('./parts/control-interface.js')).benchControlInterface(quick ? 200 : 1000) },
  { name: 'framing', podman: true, run: async () => (await import('./parts/control-interface.js')).benchFraming() },
  { name: 'fleet', run: async () => (await import('./parts/fleet.js')).benchFleet(quick) },
  { name: 'fleet-run', ankaios: true, run: async () => (await import('./parts/fleet-run.js')).benchFleetRun(quick) },
  { name: 'startup', run: async () => (await import('./parts/startup.js')).benchStartup(quick) },
  { name: 'flood', podman: true, run: async () => (await import('./parts/flood.js')).benchLogFlood(quick ? 20 : 60) },
  { name: 'released', podman: true, ankaios: true, run: async () => (await import('./parts/released.js')).benchReleased(quick ? 10 : 60) },
  { name: 'scaling', run: async () => (await import('./parts/scaling.js')).benchScaling(quick ? 10 : 60) },
  { name: 'logs', run: async () => (await import('./parts/logs.js')).benchLogRequests() },
  { name: 'logcost', podman: true, run: async () => (await import('./parts/logcost.js')).benchLogCost() },
  { name: 'metrics', run: async () => (await import('./parts/metrics.js')).benchMetrics(quick ? 10 : 30) },
  { name: 'health', podman: true, run: async () => (await import('./parts/health.js')).benchHealth(quick ? 60 : 300) },
  { name: 'tracing', run: async () => (await import('./parts/tracing.js')).benchTracing(quick ? 200 : 500, quick ? 3 : 5) },
  { name: 'soak', podman: true, named: true, run: async () => (await import('./parts/memory.js')).benchSoak(soakMinutes) },
  { name: 'heap', podman: true, run: async () => (await import('./parts/memory.js')).benchHeap(300, quick ? 600 : 1500) },
  { name: 'containerd', run: async () => (await import('./parts/containerd.js')).benchContainerd(quick ? 10 : 20, quick ? 20 : 60) },
  { name: 'e2e', podman: true, ankaios: true, run: async () => (await import('./parts/e2e.js')).benchEndToEnd(quick ? 4 : 12, 100) },
  { name: 'images', podman: true, run: async () => (await import('./parts/images.js')).benchImages(quick ? 10 : 50) },
  { name: 'systemd', podman: true, run: async () => (await import('./parts/systemd.js')).benchSystemd(quick ? 5 : 20, quick ? 20 : 60) },
  { name: 'budgets', podman: true, run: async () => (await import('./parts/budgets.js')).benchBudgets(quick) },
  { name: 'pulls', podman: true, ankaios: true, run: async () => (await import('./parts/pulls.js')).benchPulls(quick ? 1 : 3) },
];

const unknown = only?.filter((name) => !PARTS.some((p) => p.name === name)) ?? [];
if (unknown.length > 0) {
  console.error(`bench: no part named ${unknown.join(', ')}; the parts: ${PARTS.map((p) => p.name).join(', ')}`);
  process.exit(2);
}
const chosen = PARTS.filter((p) => (only ? only.includes(p.name) : !p.named) && (!p.ankaios || released));
const podmanVersion = () => {
  try {
    return execFileSync('podman', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
};
const machine = {
  cpus: os.cpus().length,
  model: os.cpus()[0]?.model,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  podman: chosen.some((p) => p.podman) ? podmanVersion() : undefined,
  date: new Date().toISOString(),
};
console.log(
  `ank-agent-rx benchmarks on ${machine.cpus} × ${machine.model}, ${machine.memoryGiB} GiB, Node ${machine.node}${machine.podman ? `, ${machine.podman}` : ''}`,
);
const needPodman = chosen.filter((p) => p.podman).map((p) => p.name);
if (needPodman.length > 0) {
  const { requirePodman } = await import('../scripts/harness/podman.js');
  try {
    requirePodman();
  } catch (err) {
    console.error(`bench: ${needPodman.join(', ')} need Podman: ${(err as Error).message}`);
    process.exit(2);
  }
}
for (const part of chosen) await part.run();
writeFileSync(path.resolve('bench/results.json'), `${JSON.stringify({ machine, figures }, null, 2)}\n`);
console.log('\nWritten to bench/results.json');
process.exit(0);
