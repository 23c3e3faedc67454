import { performance } from 'node:perf_hooks';
import { addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { record, sleep } from '../report.js';
import { busybox } from '../../scripts/harness/podman.js';
import { shippedAgent, until, rssKiB } from '../measure.js';

export async function benchLogFlood(seconds: number): Promise<void> {
  console.log(`\n7. Log flood: a \`yes\` workload followed for ${seconds} s by a server that does not read`);
  const { agentName, server, child, end } = await shippedAgent('flood');
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
    end();
  }
}
