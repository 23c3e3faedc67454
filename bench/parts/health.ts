// Bench part: Health checks and crash loops (real Podman, the real agent process).
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { instanceKey } from '../../lib/workload.js';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { median, podmanServiceCpuMs, record, sleep } from '../report.js';
import { STATS_TTL_MS } from '../../lib/drivers/metrics.js';
import { IMAGE, SLEEP_UNTIL_STOPPED, busybox, cleanup, kubePod, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { shippedAgent, until, cpuTicks, childCpu, podmanWrapper } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** The Podman CPU an agent of ours caused so far (ms): the processes it waited for, and its Podman service's. */
const podmanCpuMs = (pid: number, run: string, agentName: string) => childCpu(pid) * 1000 + podmanServiceCpuMs(path.join(run, `${agentName}_io`));

/**
 * One scrape of the container figures of 50 running workloads (`podman stats` and `ps`, by the service or by
 * Podman processes of their own with `podman_service = false`): Podman's CPU, the median of 5.
 */
async function scrapeCost(service: boolean): Promise<number> {
  const port = 19_400 + (service ? 1 : 0);
  const folder = specFolder('ank-bench-scrape-');
  const config = path.join(folder, 'agent.toml');
  writeFileSync(
    config,
    `version = 'v1'
podman_service = ${service}
`,
  );
  const { run, agentName, server, child, end } = await shippedAgent('scrape', ['--metrics', `127.0.0.1:${port}`, '-x', config]);
  try {
    const stream = await server.nextStream();
    const specs = Array.from({ length: 50 }, (_, i) => busybox(`s${i}`, agentName, { script: SLEEP_UNTIL_STOPPED }));
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
    const running = () =>
      new Set(
        reportedStates(stream)
          .filter(([, , st]) => st === 'Running(Ok)')
          .map(([w]) => w),
      ).size;
    await until(() => running() === 50, 180_000);
    await sleep(3000);
    const costs: number[] = [];
    for (let i = 0; i < 5; i++) {
      await sleep(STATS_TTL_MS + 500);
      const before = podmanCpuMs(child.pid!, run, agentName);
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      if (!text.includes('ank_agent_container_memory_bytes')) throw new Error('the scrape has no container figures');
      costs.push(podmanCpuMs(child.pid!, run, agentName) - before);
    }
    return median(costs);
  } finally {
    end();
  }
}

/** A workload healthy while /tmp/ok exists in it, checked every second. */
const checkedWorkload = (name: string, agentName: string, restartPolicy: 'Never' | 'Always' = 'Never') =>
  spec(
    name,
    agentName,
    'podman',
    `image: ${IMAGE}\ncommandOptions: ["--stop-timeout", "1", "--health-cmd", "cat /tmp/ok", "--health-interval", "1s", "--health-retries", "1"]\ncommandArgs: ["/bin/sh", "-c", "touch /tmp/ok; sleep 3600"]\n`,
    { restartPolicy },
  );

/** A podman-kube workload whose container `app` is live while /tmp/ok exists in it, probed every second. */
const probedPod = (agentName: string) => {
  const pod = `${agentName}-probed`.replace(/_/g, '-');
  const probe = '    livenessProbe:\n      exec:\n        command: ["cat", "/tmp/ok"]\n      periodSeconds: 1\n      failureThreshold: 1\n';
  return { workload: kubePod('pod', agentName, pod, [{ name: 'app', script: `touch /tmp/ok; ${SLEEP_UNTIL_STOPPED}`, more: probe }]), container: `${pod}-app` };
};

export async function benchHealth(crashSeconds: number): Promise<void> {
  console.log(`\n13. Health checks and crash loops (real Podman; a crash loop watched ${crashSeconds} s with and without the back-off)`);
  const { run, agentName, server, child, end } = await shippedAgent('health');
  try {
    const stream = await server.nextStream();
    const reportedAt = new Map<string, number>();
    stream.events.on('message', () => {
      for (const [w, , st] of reportedStates(stream)) if (!reportedAt.has(`${w} ${st}`)) reportedAt.set(`${w} ${st}`, performance.now());
    });
    const db = checkedWorkload('db', agentName);
    const app = busybox('app', agentName, { dependencies: { db: 'Running' } });
    const probed = probedPod(agentName);
    stream.send({
      FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(db), addedWorkload(app), addedWorkload(probed.workload)] } },
    });
    await until(() => reportedAt.has('app Running(Ok)') && reportedAt.has('pod Running(Ok)'), 60_000);
    record({
      name: 'healthy → its ADD_COND_RUNNING dependent Running(Ok)',
      value: reportedAt.get('app Running(Ok)')! - reportedAt.get('db Running(Ok)')!,
      unit: 'ms',
    });
    // The cost of a check: 20 s of two idle healthy workloads, each checked once a second.
    const ticks = cpuTicks(child.pid!);
    const podmanCpu = podmanCpuMs(child.pid!, run, agentName);
    await sleep(20_000);
    record({ name: 'one health check: agent CPU', value: ((cpuTicks(child.pid!) - ticks) * 10) / 40, unit: 'ms', note: 'idle agent, two checks a second' });
    record({
      name: 'one health check: Podman CPU (its service included)',
      value: (podmanCpuMs(child.pid!, run, agentName) - podmanCpu) / 40,
      unit: 'ms',
      target: '≤20.7 (a third of 62 ms, a Podman process per check)',
    });
    // Unhealthy: from the failing check to Failed at the server.
    const removed = performance.now();
    execFileSync('podman', ['exec', instanceKey(db.instanceName), 'rm', '/tmp/ok']);
    const failed = () => [...reportedAt.entries()].find(([k]) => k.startsWith('db Failed(ExecFailed): Health check'));
    await until(() => failed() !== undefined, 30_000);
    record({ name: 'file gone → Failed(ExecFailed) at the server', value: failed()![1] - removed, unit: 'ms', target: '≤1100 (interval + 100 ms)' });
    // The same for the kube workload's livenessProbe.
    const removedInPod = performance.now();
    execFileSync('podman', ['exec', probed.container, 'rm', '/tmp/ok']);
    const podFailed = () => [...reportedAt.entries()].find(([k]) => k.startsWith('pod Failed(ExecFailed): Health check'));
    await until(() => podFailed() !== undefined, 30_000);
    record({
      name: 'podman-kube livenessProbe: file gone → Failed(ExecFailed) at the server',
      value: podFailed()![1] - removedInPod,
      unit: 'ms',
      target: '≤1100 (interval + 100 ms)',
    });
  } finally {
    end();
  }
  const [served, processes] = [await scrapeCost(true), await scrapeCost(false)];
  record({
    name: "one scrape of 50 workloads' container figures: Podman CPU (its service included)",
    value: served,
    unit: 'ms',
    target: `≤${(processes / 3).toFixed(0)} (a third of podman_service = false)`,
    note: `podman_service = false: ${processes.toFixed(0)} ms`,
  });
  for (const backoff of [true, false]) {
    const name = uniqueAgent('crash');
    const config = path.join(run, `${name}.toml`);
    writeFileSync(config, `version = 'v1'\n${backoff ? '' : 'crash_loop_backoff = { first_delay = 0 }\n'}`);
    const folder = specFolder('ank-bench-crash-');
    const wrapper = podmanWrapper(folder);
    const crashServer = await FakeAnkaiosServer.start();
    const agent = spawn(BIN, ['-n', name, '-s', crashServer.url, '-k', '-r', run, '-x', config], { stdio: 'ignore', env: wrapper.env });
    try {
      const stream = await crashServer.nextStream();
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      const calls = wrapper.calls();
      const ticks = cpuTicks(agent.pid!);
      const podmanCpu = childCpu(agent.pid!);
      stream.send({
        FromServerEnum: {
          case: 'serverHello',
          value: { addedWorkloads: [addedWorkload(busybox('crasher', name, { script: 'exit 1', restartPolicy: 'Always' }))] },
        },
      });
      await sleep(crashSeconds * 1000);
      const runs = reportedStates(stream).filter(([w, , st]) => w === 'crasher' && st.startsWith('Failed')).length;
      const label = backoff ? 'with the back-off' : 'without (first_delay = 0)';
      record({ name: `crash loop ${label}: runs in ${crashSeconds} s`, value: runs, unit: 'runs' });
      record({ name: `crash loop ${label}: podman processes per second`, value: (wrapper.calls() - calls) / crashSeconds, unit: '/s' });
      record({ name: `crash loop ${label}: podman CPU`, value: ((childCpu(agent.pid!) - podmanCpu) / crashSeconds) * 100, unit: '% core' });
      record({ name: `crash loop ${label}: agent CPU`, value: ((cpuTicks(agent.pid!) - ticks) / 100 / crashSeconds) * 100, unit: '% core' });
    } finally {
      agent.kill('SIGKILL');
      crashServer.stop();
      cleanup(name);
    }
  }
}
