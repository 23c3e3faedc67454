// Bench part: What a log line costs: the shipped process, real Podman, a server that reads everything.
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { instanceKey } from '../../lib/workload.js';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { record, sleep } from '../report.js';
import { IMAGE, busybox, cleanup, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { until, rssKiB, cpuTicks, type AgentStart } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** Lines the log workload prints at once (then it sleeps): what every agent reads and sends. */
const LOG_LINES = 200_000;

const LOG_SCRIPT = `seq 1 ${LOG_LINES} | sed 's/$/ a line of the kind a workload prints, neither short nor long/'; sleep 3600`;

/** One agent serving a follow LogsRequest of LOG_LINES lines: its CPU per 100 000 entries, entries per second, peak RSS. */
async function logCost(start: AgentStart): Promise<{ cpu: number; perSecond: number; rss: number }> {
  const run = specFolder('ank-bench-cost-');
  const agentName = uniqueAgent('cost');
  const server = await FakeAnkaiosServer.start();
  const child = start(server.url, agentName, run, process.env);
  try {
    const stream = await server.nextStream();
    await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    const printer = busybox('printer', agentName, { script: LOG_SCRIPT });
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(printer)] } } });
    await until(() => reportedStates(stream).some(([w, , st]) => w === 'printer' && st === 'Running(Ok)'));
    // All lines are in the container's log before the request.
    await until(() => podmanLogLines(instanceKey(printer.instanceName)) >= LOG_LINES, 60_000);
    await sleep(2000);
    let entries = 0;
    stream.events.on('message', (m: (typeof stream.received)[number]) => {
      if (m.ToServerEnum.case === 'logEntriesResponse') entries += m.ToServerEnum.value.logEntriesResponse?.logEntries.length ?? 0;
    });
    const pid = child.pid!;
    const ticks = cpuTicks(pid);
    let rss = rssKiB(pid);
    const peak = setInterval(() => (rss = Math.max(rss, rssKiB(pid))), 100);
    const t = performance.now();
    stream.send({
      FromServerEnum: { case: 'logsRequest', value: { requestId: 'cost', logsRequest: { workloadNames: [printer.instanceName], follow: true } } },
    });
    await until(() => entries >= LOG_LINES, 300_000);
    const seconds = (performance.now() - t) / 1000;
    clearInterval(peak);
    return { cpu: (((cpuTicks(pid) - ticks) / 100) * 100_000) / entries, perSecond: entries / seconds, rss: rss / 1024 };
  } finally {
    child.kill('SIGKILL');
    server.stop();
    cleanup(agentName);
  }
}

const podmanLogLines = (container: string) => {
  try {
    return Number(execFileSync('sh', ['-c', `podman logs ${container} 2>/dev/null | wc -l`], { encoding: 'utf8' }).trim());
  } catch {
    return 0;
  }
};

export async function benchLogCost(): Promise<void> {
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  console.log(
    `\n11. What a log line costs: ${LOG_LINES} lines followed by a server that reads everything (real Podman${released ? ', beside the released agent' : ''})`,
  );
  // The floor: podman logs alone, read to its end.
  const floorName = uniqueAgent('floor');
  const floor = busybox('floor', floorName, { script: LOG_SCRIPT });
  execFileSync('podman', ['run', '-d', '--name', instanceKey(floor.instanceName), IMAGE, '/bin/sh', '-c', LOG_SCRIPT], { stdio: 'ignore' });
  try {
    await until(() => podmanLogLines(instanceKey(floor.instanceName)) >= LOG_LINES, 60_000);
    const t = performance.now();
    execFileSync('sh', ['-c', `podman logs ${instanceKey(floor.instanceName)} > /dev/null 2>&1`]);
    record({ name: 'floor: podman logs alone, lines per second', value: LOG_LINES / ((performance.now() - t) / 1000), unit: '/s' });
  } finally {
    execFileSync('podman', ['rm', '-f', instanceKey(floor.instanceName)], { stdio: 'ignore' });
  }
  const ours = await logCost((url, name, run, env) => spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }));
  const base = released
    ? await logCost((url, name, run, env) => spawn(released, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }))
    : undefined;
  record({
    name: 'ours: agent CPU per 100 000 log entries',
    value: ours.cpu,
    unit: 's',
    target: base ? `≤${(1.5 * base.cpu).toFixed(2)} (1.5 × released)` : undefined,
  });
  record({
    name: 'ours: log entries per second at the server',
    value: ours.perSecond,
    unit: '/s',
    target: base ? `≥${Math.round(base.perSecond)} (released)` : undefined,
  });
  record({ name: 'ours: peak RSS while sending them', value: ours.rss, unit: 'MiB', target: '≤100' });
  if (base) {
    record({ name: 'released: agent CPU per 100 000 log entries', value: base.cpu, unit: 's' });
    record({ name: 'released: log entries per second at the server', value: base.perSecond, unit: '/s' });
    record({ name: 'released: peak RSS while sending them', value: base.rss, unit: 'MiB' });
  }
}
