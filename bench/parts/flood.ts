// Bench part: A log flood to a server that does not read: what the agent keeps, and what it costs.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { record, sleep } from '../report.js';
import { busybox, cleanup, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { until, rssKiB } from '../measure.js';

export async function benchLogFlood(seconds: number): Promise<void> {
  console.log(`\n7. Log flood: a \`yes\` workload followed for ${seconds} s by a server that does not read`);
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-flood-'));
  const agentName = uniqueAgent('flood');
  const server = await FakeAnkaiosServer.start();
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run], { stdio: 'ignore' });
  try {
    const stream = await server.nextStream();
    const yes = busybox('yes', agentName, { script: 'yes' });
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(yes)] } } });
    await until(() => reportedStates(stream).some(([w, , st]) => w === 'yes' && st === 'Running(Ok)'));
    await sleep(1000);
    const before = rssKiB(child.pid!);
    stream.stall();
    stream.send({ FromServerEnum: { case: 'logsRequest', value: { requestId: 'flood', logsRequest: { workloadNames: [yes.instanceName], follow: true } } } });
    let peak = before;
    for (let t = 0; t < seconds; t++) {
      await sleep(1000);
      peak = Math.max(peak, rssKiB(child.pid!));
    }
    record({ name: 'agent RSS growth while a server does not read a followed flood', value: (peak - before) / 1024, unit: 'MiB', target: '<64' });
    stream.send({ FromServerEnum: { case: 'logsCancelRequest', value: { requestId: 'flood' } } });
    stream.resume();
    const late = busybox('late', agentName, { script: 'sleep 3600' });
    const t = performance.now();
    stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: [addedWorkload(late)] } } });
    await until(() => reportedStates(stream).some(([w, , st]) => w === 'late' && st === 'Running(Ok)'), 60_000);
    record({ name: 'after the cancel: UpdateWorkload → new workload Running(Ok)', value: performance.now() - t, unit: 'ms' });
  } finally {
    child.kill('SIGKILL');
    server.stop();
    cleanup(agentName);
  }
}
