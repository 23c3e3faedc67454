// Bench part: Agent overhead: the real agent process against a fake server, start-up to its hello.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { median, record, sleep } from '../report.js';
import { busybox, cleanup, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { until, idleFigures, writeBaseline } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

export async function benchOverhead(idleSeconds: number): Promise<void> {
  console.log(`\n4. Agent overhead (the real agent process against a fake server; idle for ${idleSeconds} s)`);
  const run = specFolder('ank-bench-');
  const helloTimes: number[] = [];
  for (let i = 0; i < 5; i++) {
    const server = await FakeAnkaiosServer.start();
    const t = performance.now();
    const child = spawn(BIN, ['-n', `hello_${i}`, '-s', server.url, '-k', '-r', run], { stdio: 'ignore' });
    const stream = await server.nextStream();
    await stream.waitFor(() => true);
    helloTimes.push(performance.now() - t);
    child.kill('SIGKILL');
    server.stop();
  }
  record({ name: 'process start → AgentHello at the server, median', value: median(helloTimes), unit: 'ms', target: '<250' });
  const baselineFile = writeBaseline(run);
  const baselineTimes: number[] = [];
  let baselineRss = 0;
  let baselineCpu = 0;
  for (let i = 0; i < 5; i++) {
    const server = await FakeAnkaiosServer.start();
    const t = performance.now();
    const child = spawn(process.execPath, [baselineFile, `127.0.0.1:${server.port}`], { stdio: 'ignore' });
    const stream = await server.nextStream();
    await stream.waitFor(() => true);
    baselineTimes.push(performance.now() - t);
    if (i === 0) {
      await sleep(2000);
      ({ rss: baselineRss, cpu: baselineCpu } = await idleFigures(child.pid!, idleSeconds));
    }
    child.kill('SIGKILL');
    server.stop();
  }
  record({ name: 'for comparison: Node + gRPC client, start → first message, median', value: median(baselineTimes), unit: 'ms' });
  record({ name: 'for comparison: Node + gRPC client, idle RSS', value: baselineRss, unit: 'MiB' });
  record({ name: 'for comparison: Node + gRPC client, idle CPU', value: baselineCpu, unit: '% core' });
  for (const n of [0, 50]) {
    const agentName = uniqueAgent('idle');
    const server = await FakeAnkaiosServer.start();
    const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run], { stdio: 'ignore' });
    try {
      const stream = await server.nextStream();
      const specs = Array.from({ length: n }, (_, i) => busybox(`idle${i}`, agentName));
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
      await until(() => specs.every((s) => reportedStates(stream).some(([w, , st]) => w === s.instanceName.workloadName && st === 'Running(Ok)')));
      await sleep(2000);
      const { rss, cpu } = await idleFigures(child.pid!, idleSeconds);
      record({ name: `idle RSS with ${n} workloads, median`, value: rss, unit: 'MiB', target: n === 50 ? '<75' : undefined });
      record({ name: `idle CPU with ${n} workloads (podman children not counted)`, value: cpu, unit: '% core', target: n === 50 ? '<0.4' : undefined });
    } finally {
      child.kill('SIGKILL');
      server.stop();
      cleanup(agentName);
    }
  }
}
