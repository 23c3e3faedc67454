// Bench part: Log requests: a storm of request + cancel pairs, and a fan-out to 200 workloads (a fake podman).
import { performance } from 'node:perf_hooks';
import { record, sleep } from '../report.js';
import { until, rssKiB, cpuTicks, fdCount, zombies, settledAgent } from '../measure.js';

export async function benchLogRequests(): Promise<void> {
  console.log('\n10. Log requests (the real agent process, a fake podman whose `podman logs` prints a line and waits)');
  const { pid, stream, specs, stop } = await settledAgent('logs', 200);
  try {
    const before = { ticks: cpuTicks(pid), fds: fdCount(pid), rss: rssKiB(pid) / 1024 };
    let peakZombies = 0;
    const watch = setInterval(() => (peakZombies = Math.max(peakZombies, zombies(pid))), 50);
    // Each cancel at once after its request, then (harder) 1 000 that each stream a line first.
    const ask = (requestId: string, i: number) =>
      stream.send({
        FromServerEnum: { case: 'logsRequest', value: { requestId, logsRequest: { workloadNames: [specs[i % 200].instanceName], follow: true } } },
      });
    const cancel = (requestId: string) => stream.send({ FromServerEnum: { case: 'logsCancelRequest', value: { requestId } } });
    const answered = (requestId: string) =>
      stream.received.some((m) => m.ToServerEnum.case === 'logEntriesResponse' && m.ToServerEnum.value.requestId === requestId);
    for (let i = 0; i < 1000; i++) {
      ask(`storm${i}`, i);
      cancel(`storm${i}`);
    }
    await sleep(5000);
    const middle = { ticks: cpuTicks(pid), fds: fdCount(pid), rss: rssKiB(pid) / 1024 };
    record({ name: 'storm: 1 000 × (follow LogsRequest + cancel), agent CPU', value: (middle.ticks - before.ticks) / 100, unit: 's', target: '≤1' });
    record({ name: 'storm: open fds after it settled (5 s) − before', value: middle.fds - before.fds, unit: 'fds', target: '0' });
    record({ name: 'storm: RSS after it settled − before', value: middle.rss - before.rss, unit: 'MiB', target: '≤5' });
    const rounds: number[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 1000; i += 50) {
        const batch = Array.from({ length: 50 }, (_, j) => `late${round}.${i + j}`);
        batch.forEach((id, j) => ask(id, i + j));
        await until(() => batch.every(answered));
        batch.forEach(cancel);
      }
      await sleep(3000);
      rounds.push(rssKiB(pid) / 1024);
    }
    clearInterval(watch);
    const after = { ticks: cpuTicks(pid), fds: fdCount(pid) };
    record({
      name: 'storm: 3 000 × (follow LogsRequest, a line, cancel), agent CPU each',
      value: ((after.ticks - middle.ticks) / 100 / 3000) * 1000,
      unit: 'ms',
      note: 'a podman logs process started, read and killed',
    });
    record({ name: 'storm: open fds after them − before', value: after.fds - before.fds, unit: 'fds', target: '0' });
    record({
      name: 'storm: RSS after each 1 000 of them − before',
      value: rounds.at(-1)! - before.rss,
      unit: 'MiB',
      note: rounds.map((r) => (r - before.rss).toFixed(1)).join(' / '),
    });
    record({ name: 'storm: most zombie children seen at once', value: peakZombies, unit: 'processes' });
    const t = performance.now();
    stream.send({
      FromServerEnum: { case: 'logsRequest', value: { requestId: 'fan', logsRequest: { workloadNames: specs.map((s) => s.instanceName), follow: true } } },
    });
    const streaming = () =>
      new Set(
        stream.received.flatMap((m) =>
          m.ToServerEnum.case === 'logEntriesResponse' && m.ToServerEnum.value.requestId === 'fan'
            ? (m.ToServerEnum.value.logEntriesResponse?.logEntries ?? []).map((e) => e.workloadName?.workloadName)
            : [],
        ),
      ).size;
    await until(() => streaming() === 200, 60_000);
    record({
      name: 'fan-out: LogsRequest for 200 workloads → a line of each at the server',
      value: performance.now() - t,
      unit: 'ms',
      target: '≤5000',
      note: 'at most 256 streams at once',
    });
  } finally {
    stop();
  }
}
