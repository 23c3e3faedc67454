// Bench part: containerd: exits seen, and what watching idle workloads costs (real containerd through nerdctl).
import { execFileSync } from 'node:child_process';
import { median, p95, record, sleep } from '../report.js';
import { IMAGE, PodmanAgent, SLEEP_UNTIL_STOPPED, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { until } from '../measure.js';
import { exitLatencies } from './latency.js';
import { harnessCli } from '../../scripts/harness/processes.js';

/** When containerd says a container finished (ms, wall clock). */
const containerdFinishedAt = (name: string) =>
  Date.parse(execFileSync('nerdctl', ['inspect', '--format', '{{.State.FinishedAt}}', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());

/** A containerd workload of the local busybox image running `sh -c <script>`. */
const onContainerd = (name: string, agentName: string, script: string) =>
  spec(name, agentName, 'containerd', `image: ${IMAGE}\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(script)}]\n`);

/**
 * Real containerd through nerdctl, the workload pipelines in-process (as part 3): exit → Succeeded reported,
 * on containerd's events and with them off (one `nerdctl ps` a second, as the released agent's poll without its
 * `inspect`); then the nerdctl processes a second that watching 50 idle workloads costs (released: 2, a `ps` and
 * an `inspect`).
 */
export async function benchContainerd(count: number, idleSeconds: number): Promise<void> {
  console.log(`\n18. containerd (real containerd, nerdctl; ${count} exits; 50 idle workloads for ${idleSeconds} s)`);
  for (const events of [false, true]) {
    const latencies = await exitLatencies(events, count, { make: onContainerd, finishedAt: containerdFinishedAt });
    const how = events ? "containerd's events" : 'events off: one nerdctl ps a second';
    record({ name: `containerd: exit noticed, median (${how})`, value: median(latencies), unit: 'ms', target: events ? '<50' : undefined });
    record({ name: `containerd: exit noticed, p95 (${how})`, value: p95(latencies), unit: 'ms', target: events ? '<100' : undefined });
  }
  const nerdctl = harnessCli('nerdctl');
  const agent = new PodmanAgent(uniqueAgent('ctrdidle'), undefined, harnessCli('podman'), { nerdctl });
  try {
    const idle = Array.from({ length: 50 }, (_, i) => onContainerd(`idle${i}`, agent.agentName, SLEEP_UNTIL_STOPPED));
    agent.send({ kind: 'serverHello', added: idle });
    await until(() => idle.every((w) => agent.history(w.instanceName.workloadName).includes('Running(Ok)')), 120_000);
    await sleep(2000);
    const before = nerdctl.calls;
    await sleep(idleSeconds * 1000);
    record({
      name: 'containerd: nerdctl processes a second, 50 idle workloads',
      value: (nerdctl.calls - before) / idleSeconds,
      unit: '/s',
      note: 'released: 2/s',
    });
  } finally {
    agent.stop();
  }
}
