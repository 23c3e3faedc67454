// Bench part: Podman call economy: what the agent's podman calls cost at steady state (real Podman).
import { execFileSync } from 'node:child_process';
import { cpuMs, record, sleep } from '../report.js';
import { PodmanAgent, busybox, uniqueAgent } from '../../scripts/harness/podman.js';
import { until } from '../measure.js';
import { harnessCli } from '../../scripts/harness/processes.js';

/** CPU time (ms) of the children this process waited for: what the podman calls it ran cost. */
const childCpuMs = () => cpuMs(process.pid).children;

export async function benchEconomy(idleSeconds: number): Promise<void> {
  console.log(`\n2. Podman call economy (real Podman, sleeping busybox workloads, steady state over ${idleSeconds} s)`);
  for (const events of [true, false]) {
    for (const n of [1, 10, 50]) {
      const agent = new PodmanAgent(uniqueAgent('bench'), undefined, harnessCli('podman'), { events });
      const how = events ? 'events' : 'events off: one poll a second';
      try {
        const specs = Array.from({ length: n }, (_, i) => busybox(`sleeper${i}`, agent.agentName));
        agent.send({ kind: 'serverHello', added: specs });
        await until(() => specs.every((s) => agent.history(s.instanceName.workloadName).includes('Running(Ok)')));
        await sleep(1500);
        const before = agent.cli.calls;
        await sleep(idleSeconds * 1000);
        const perSecond = (agent.cli.calls - before) / idleSeconds;
        record({ name: `Podman processes per second with ${n} workload(s) (${how})`, value: perSecond, unit: '/s', target: events ? '≈0.1' : '≈1' });
        if (n === 50) {
          const cpu = childCpuMs();
          for (let i = 0; i < 5; i++) execFileSync('podman', ['ps', '--all', '--format=json'], { stdio: 'ignore' });
          const psMs = (childCpuMs() - cpu) / 5;
          record({
            name: `Podman CPU for watching 50 idle workloads (${how})`,
            value: (perSecond * psMs) / 10,
            unit: '% core',
            target: events ? '<1.5' : undefined,
            note: `one ps: ${psMs.toFixed(0)} ms CPU`,
          });
        }
      } finally {
        agent.stop();
      }
    }
  }
}
