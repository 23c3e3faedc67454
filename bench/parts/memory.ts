// Bench part: Memory over time: a soak of updates and log requests, and what the agent's heap holds after a long
// churn.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { type AgentStream, FakeAnkaiosServer, addedWorkload } from '../../scripts/harness/fake-server.js';
import { median, record, sleep } from '../report.js';
import { busybox, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { shippedAgent, until, rssKiB, fakePodmanWithLogs, latestStates } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

/**
 * Ten workloads of `agentName` on the agent behind `stream`, running; `step()` updates the next one (in turn)
 * and, with every third update, asks for the logs of another: the churn of the soak and heap parts.
 */
async function churning(stream: AgentStream, agentName: string) {
  const latest = latestStates(stream);
  const version = (i: number, v: number) => busybox(`w${i}`, agentName, { script: `echo v${v}; sleep 3600` });
  const current = Array.from({ length: 10 }, (_, i) => version(i, 0));
  const allRunning = () => current.every((s) => latest.get(s.instanceName.workloadName) === 'Running(Ok)');
  stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: current.map(addedWorkload) } } });
  await until(allRunning, 120_000);
  let tick = 0;
  return {
    allRunning,
    /** One update; true when it came with a log request. */
    step(): boolean {
      const i = tick % 10;
      const next = version(i, tick + 1);
      const deleted = [{ instanceName: current[i].instanceName, dependencies: {} }];
      stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: [addedWorkload(next)], deletedWorkloads: deleted } } });
      current[i] = next;
      const asks = tick % 3 === 0;
      if (asks) {
        const logsRequest = { workloadNames: [current[(i + 5) % 10].instanceName], tail: 10 };
        stream.send({ FromServerEnum: { case: 'logsRequest', value: { requestId: `churn${tick}`, logsRequest } } });
      }
      tick += 1;
      return asks;
    },
  };
}

/** The slope of a least-squares line through (x, y), per unit of x. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const sxy = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

/**
 * The agent as shipped under churn (real Podman): 10 workloads, one updated every 3 s, a LogsRequest every 10 s.
 * Memory is sampled every 10 s: RSS, and the heap in use as the metrics endpoint tells it; the lowest heap of
 * each minute is what is left after V8 collected, so its trend (from minute 5 on) tells a leak from garbage.
 */
export async function benchSoak(minutes: number): Promise<void> {
  console.log(`\n16. Soak (the real agent process and its twin, real Podman, ${minutes} min: an update of each every 3 s, a log request every 10 s)`);
  const port = 19_500 + (process.pid % 400);
  const { agentName, server, child, end } = await shippedAgent('soak', ['--metrics', String(port)]);
  // A second agent under the same churn has its heap snapshotted (after minute 5 and at the end): what it keeps
  // after a full collection. Not the first: writing a snapshot leaves tens of MiB of the process's memory resident.
  const folder = specFolder('ank-bench-soak-heap-');
  const env = { ...process.env, NODE_OPTIONS: '--heapsnapshot-signal=SIGUSR2' };
  const twin = await shippedAgent('soak-twin', [], { env, cwd: folder });
  try {
    const [churn, twinChurn] = await Promise.all([churning(await server.nextStream(), agentName), churning(await twin.server.nextStream(), twin.agentName)]);
    const heapUsed = async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN) / 2 ** 20;
    };
    const samples: Array<{ at: number; rss: number; heap: number }> = [];
    const started = performance.now();
    const settleMinutes = Math.min(5, minutes / 2);
    let updates = 0;
    let settledHeap: Awaited<ReturnType<typeof heapSnapshot>> | undefined;
    while (performance.now() - started < minutes * 60_000) {
      updates += 1;
      twinChurn.step();
      if (churn.step()) samples.push({ at: (performance.now() - started) / 60_000, rss: rssKiB(child.pid!) / 1024, heap: await heapUsed() });
      if (!settledHeap && performance.now() - started >= settleMinutes * 60_000) settledHeap = await heapSnapshot(twin.child, folder);
      await sleep(3000);
    }
    await until(churn.allRunning, 60_000);
    const endHeap = await heapSnapshot(twin.child, folder);
    const settled = samples.filter((x) => x.at >= settleMinutes);
    const lowest = new Map<number, number>();
    for (const x of settled) lowest.set(Math.floor(x.at), Math.min(lowest.get(Math.floor(x.at)) ?? Number.POSITIVE_INFINITY, x.heap));
    const lowestHeapPerMinute = [...lowest.entries()];
    record({ name: 'soak: updates applied, all 10 running at the end', value: updates, unit: 'updates' });
    record({ name: 'soak: RSS first sample → last', value: samples.at(-1)!.rss, unit: 'MiB', note: `from ${samples[0].rss.toFixed(1)}` });
    record({ name: 'soak: RSS trend after the first minutes', value: slope(settled.map((x) => [x.at / 60, x.rss])), unit: 'MiB/h' });
    // Whether RSS levels off: its trend over the last half of the run beside that over the first half.
    const half = minutes / 2;
    const rssTrend = (from: number, to: number) => slope(samples.filter((x) => x.at >= from && x.at < to).map((x) => [x.at / 60, x.rss]));
    record({ name: 'soak: RSS trend, first half (after the first minutes)', value: rssTrend(Math.min(5, half / 2), half), unit: 'MiB/h' });
    record({ name: 'soak: RSS trend, last half', value: rssTrend(half, minutes + 1), unit: 'MiB/h', target: '≈0' });
    for (let from = 0; from < minutes; from += 15) {
      const window = samples.filter((x) => x.at >= from && x.at < from + 15);
      if (window.length > 0)
        console.log(
          `  minutes ${from}–${from + 15}: RSS ${median(window.map((x) => x.rss)).toFixed(1)} MiB, heap ${Math.min(...window.map((x) => x.heap)).toFixed(1)} MiB (lowest)`,
        );
    }
    record({
      name: "soak: heap left after GC (each minute's lowest), trend",
      value: slope(lowestHeapPerMinute.map(([m, h]) => [m / 60, h])),
      unit: 'MiB/h',
      target: '≈0',
      note: `${lowestHeapPerMinute[0]?.[1].toFixed(1)} → ${lowestHeapPerMinute.at(-1)?.[1].toFixed(1)} MiB`,
    });
    record({
      name: `soak: heap kept after a full collection (objects, strings, arrays, closures), minute ${settleMinutes} → end`,
      value: keptGrowth(settledHeap ?? endHeap, endHeap),
      unit: 'KiB',
      target: '≈0',
      note: `code: ${keptGrowth(settledHeap ?? endHeap, endHeap, ['code']).toFixed(0)} KiB`,
    });
  } finally {
    end();
    twin.end();
  }
}

/** The count and bytes of a heap snapshot's nodes by their type (object, string, closure, code, …). */
function heapByType(file: string): Map<string, { count: number; bytes: number }> {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const [type, size] = [fields.indexOf('type'), fields.indexOf('self_size')];
  const byType = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const name = snap.snapshot.meta.node_types[0][snap.nodes[i + type]];
    const sum = byType.get(name) ?? { count: 0, bytes: 0 };
    byType.set(name, { count: sum.count + 1, bytes: sum.bytes + snap.nodes[i + size] });
  }
  return byType;
}

/**
 * A heap snapshot of `child` (started with `--heapsnapshot-signal=SIGUSR2`, written into `folder`), by type.
 * V8 collects all garbage before it writes one, so it holds only what the agent keeps.
 */
async function heapSnapshot(child: ChildProcess, folder: string): Promise<Map<string, { count: number; bytes: number }>> {
  const snapshots = () =>
    readdirSync(folder)
      .filter((f) => f.endsWith('.heapsnapshot'))
      .sort();
  const before = snapshots().length;
  child.kill('SIGUSR2');
  await until(() => snapshots().length > before, 60_000);
  // Written while the agent stands still: done when it reads as a whole.
  const file = path.join(folder, snapshots()[before]);
  for (let waited = 0; ; waited += 1000) {
    try {
      const byType = heapByType(file);
      rmSync(file);
      return byType;
    } catch (err) {
      if (waited > 120_000) throw err;
      await sleep(1000);
    }
  }
}

/** What a leak would hold: the KiB that objects, strings, arrays and closures grew by from `first` to `second`. */
const KEPT = ['object', 'string', 'concatenated string', 'sliced string', 'array', 'closure'];
const keptGrowth = (first: Map<string, { bytes: number }>, second: Map<string, { bytes: number }>, types = KEPT) =>
  types.reduce((sum, t) => sum + ((second.get(t)?.bytes ?? 0) - (first.get(t)?.bytes ?? 0)), 0) / 1024;

/**
 * The agent as shipped on the fake podman, 10 workloads, one updated every 250 ms and a log request with every
 * third update; heap snapshots (Node's --heapsnapshot-signal) after `warm` updates and after `more` further
 * ones. What grows between them is what a leak would hold: the objects, strings, arrays and closures; V8's
 * compiled code grows while it optimises more of the agent, and levels off.
 */
export async function benchHeap(warm: number, more: number): Promise<void> {
  console.log(`\n17. Heap after churn (the real agent process, fake podman; snapshots after ${warm} and ${warm + more} updates)`);
  const folder = specFolder('ank-bench-heap-');
  const agentName = uniqueAgent('heap');
  const server = await FakeAnkaiosServer.start();
  const env = { ...fakePodmanWithLogs(false), NODE_OPTIONS: '--heapsnapshot-signal=SIGUSR2' };
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', folder], { stdio: 'ignore', env, cwd: folder });
  try {
    const steps = await churning(await server.nextStream(), agentName);
    const churn = async (n: number) => {
      for (let i = 0; i < n; i++) {
        steps.step();
        await sleep(250);
      }
      await sleep(5000);
    };
    const snapshot = () => heapSnapshot(child, folder);
    await churn(warm);
    const first = await snapshot();
    await churn(more);
    const second = await snapshot();
    record({
      name: `heap: objects, strings, arrays, closures grown over ${more} updates`,
      value: keptGrowth(first, second),
      unit: 'KiB',
      target: '≈0',
    });
    record({ name: `heap: V8's compiled code grown over the same`, value: keptGrowth(first, second, ['code']), unit: 'KiB' });
  } finally {
    child.kill('SIGKILL');
    server.stop();
  }
}
