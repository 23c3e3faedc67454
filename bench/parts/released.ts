// Bench part: Side by side with the released agent (ANKAIOS_BIN): hello, idle figures and exits, same fake server.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { instanceKey } from '../../lib/workload.js';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { median, record, sleep } from '../report.js';
import { busybox, cleanup, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { until, finishedAt, idleFigures, type AgentStart, podmanWrapper } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

async function measureAgent(label: string, start: AgentStart, idleSeconds: number): Promise<void> {
  const folder = specFolder('ank-bench-side-');
  const wrapper = podmanWrapper(folder);
  const helloTimes: number[] = [];
  for (let i = 0; i < 5; i++) {
    const server = await FakeAnkaiosServer.start();
    const t = performance.now();
    const child = start(server.url, `hello_${i}`, folder, wrapper.env);
    await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
    helloTimes.push(performance.now() - t);
    child.kill('SIGKILL');
    server.stop();
  }
  record({ name: `${label}: process start → AgentHello at the server, median`, value: median(helloTimes), unit: 'ms' });
  for (const n of [0, 50]) {
    const agentName = uniqueAgent('side');
    const server = await FakeAnkaiosServer.start();
    const child = start(server.url, agentName, folder, wrapper.env);
    try {
      const stream = await server.nextStream();
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      const specs = Array.from({ length: n }, (_, i) => busybox(`idle${i}`, agentName));
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
      await until(() => specs.every((s) => reportedStates(stream).some(([w, , st]) => w === s.instanceName.workloadName && st === 'Running(Ok)')));
      await sleep(2000);
      const calls = wrapper.calls();
      const { rss, cpu } = await idleFigures(child.pid!, idleSeconds);
      record({ name: `${label}: idle RSS with ${n} workloads, median`, value: rss, unit: 'MiB' });
      record({ name: `${label}: idle CPU with ${n} workloads`, value: cpu, unit: '% core' });
      record({ name: `${label}: podman calls per second with ${n} workloads`, value: (wrapper.calls() - calls) / idleSeconds, unit: '/s' });
      if (n === 0) {
        // Exits: ten workloads that end one after another; exit → Succeeded at the server.
        const exits = Array.from({ length: 10 }, (_, i) => busybox(`exit${i}`, agentName, { script: `sleep ${(2 + i * 0.37).toFixed(2)}` }));
        const seen = new Map<string, number>();
        stream.events.on('message', () => {
          for (const [w, , st] of reportedStates(stream)) if (st === 'Succeeded(Ok)' && !seen.has(w)) seen.set(w, Date.now());
        });
        stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: exits.map(addedWorkload) } } });
        await until(() => exits.every((e) => seen.has(e.instanceName.workloadName)), 60_000);
        const latencies = exits.map((e) => seen.get(e.instanceName.workloadName)! - finishedAt(instanceKey(e.instanceName)));
        record({ name: `${label}: container exit → Succeeded at the server, median`, value: median(latencies), unit: 'ms' });
        stream.send({
          FromServerEnum: { case: 'updateWorkload', value: { deletedWorkloads: exits.map((e) => ({ instanceName: e.instanceName, dependencies: {} })) } },
        });
        await sleep(2000);
      }
    } finally {
      child.kill('SIGKILL');
      server.stop();
      cleanup(agentName);
    }
  }
}

export async function benchReleased(idleSeconds: number): Promise<void> {
  const released = path.join(process.env.ANKAIOS_BIN ?? '', 'ank-agent');
  console.log(`\n8. Side by side with the released agent (${released}), same fake server, same workloads; idle ${idleSeconds} s`);
  await measureAgent('ours', (url, name, run, env) => spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), idleSeconds);
  await measureAgent('released', (url, name, run, env) => spawn(released, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), idleSeconds);
}
