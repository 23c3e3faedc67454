// Bench part: the hot path in budgets. Each kind of message a create and a delete pass through, priced in the
// agent's own CPU per message (every thread's, from /proc/<pid>/task/*/schedstat) over a burst of thousands, with
// the budget it must fit and, where the released agent (ANKAIOS_BIN) handles the same message, its figure. The
// bursts sent twice also say what of ours the main thread spent: the rest is V8's helpers (compiler, collector).
// The server's messages and Podman's event lines go to the agent as shipped (bin/ank-agent.cjs, a fake server, the
// fake podman of bench/fake-podman.mjs, ours without the Podman service, which the fake cannot be); a libpod
// answer, a CLI call and a state's encoding have no message of their own to send a process, so they run through
// the agent's own modules in this process, which does nothing else meanwhile (its CPU from process.cpuUsage: every
// thread's, a child's excluded, as the agent's).
// Beside them, a state of another agent one every 30 ms, as a fleet's come (each to a process gone idle since the
// last), with a bare Node HTTP/2 client's price for such frames; what the machine charges a bare Node process for a
// wake, and the memory an idle wake touches (ours, the released agent's, a bare Node process's): where memory is
// slow to touch again, a wake's CPU follows it.
import { type ChildProcess, spawn } from 'node:child_process';
import http2 from 'node:http2';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { asyncScheduler, firstValueFrom, lastValueFrom, mergeMap, range } from 'rxjs';
import { FakeAnkaiosServer, addedWorkload } from '../../scripts/harness/fake-server.js';
import { BIN } from '../../scripts/harness/agent.js';
import { busybox, uniqueAgent } from '../../scripts/harness/podman.js';
import { specFolder } from '../../scripts/harness/temp.js';
import { record, sleep } from '../report.js';
import { anonymousTouchedKiB, fakePodmanWithLogs, latestStates, mainThreadCpuMs, processCpuMs, settled, until, withoutPodmanService } from '../measure.js';
import { Processes } from '../../lib/drivers/processes.js';
import { Cli } from '../../lib/runtimes/base/cli.js';
import { Libpod } from '../../lib/runtimes/podman/libpod.js';
import { toServerBytes } from '../../lib/codec/wire.js';
import { frame } from '../../lib/drivers/grpc-call.js';
import { ExecutionState } from '../../lib/execution-state.js';

/** The budgets, in µs of the agent's CPU per message; those a single create passes through add up to at most 1.5 ms. */
export const BUDGETS = {
  stateOfOther: 25,
  statesOfOthers100: 500,
  addWaiting: 250,
  deleteWaiting: 250,
  eventLine: 40,
  eventLineAmongMany: 40,
  libpodAnswer: 150,
  cliCall: 200,
  stateSent: 25,
  /** A create on the fake podman, all told: its UpdateWorkload, its CLI calls and its states. */
  create: 1500,
} as const;

type Row = keyof typeof BUDGETS;
const NAMES: Record<Row, string> = {
  stateOfOther: "UpdateWorkloadState: 1 state of another agent's workload",
  statesOfOthers100: 'UpdateWorkloadState: 100 states of other agents',
  addWaiting: 'UpdateWorkload: 1 workload added that waits (+ its state)',
  deleteWaiting: 'UpdateWorkload: 1 waiting workload deleted (+ its state)',
  eventLine: "Podman event line (a start of the agent's running container)",
  eventLineAmongMany: 'Podman event line, the same with 400 of its containers running',
  libpodAnswer: 'libpod answer (image exists, real Podman service)',
  cliCall: 'CLI call through the launcher (`true`)',
  stateSent: 'a state encoded and framed for the server',
  create: 'a create on the fake podman, all told',
};

function say(row: Row, ours: number, released?: number, mainThread?: number): void {
  const notes = [
    mainThread === undefined ? undefined : `main thread ${mainThread.toFixed(0)} µs`,
    released === undefined ? undefined : `released ${released.toFixed(1)} µs: ${(ours / released).toFixed(1)} ×`,
  ].filter((n) => n !== undefined);
  record({ name: `budget: ${NAMES[row]}`, value: ours, unit: 'µs/msg', target: `≤${BUDGETS[row]}`, note: notes.join('; ') || undefined });
}

/** The agent's CPU in µs per message for what `send` sends, once the agent has settled after it. */
async function perMessage(pid: number, count: number, send: () => unknown): Promise<number> {
  return (await perMessageByThread(pid, count, send)).all;
}

/** The same, with its main thread's share: the rest is V8's helper threads' (its compiler's and collector's). */
async function perMessageByThread(pid: number, count: number, send: () => unknown): Promise<{ all: number; main: number }> {
  await settled(pid);
  const [all, main] = [processCpuMs(pid), mainThreadCpuMs(pid)];
  await send();
  await settled(pid);
  return { all: ((processCpuMs(pid) - all) / count) * 1000, main: ((mainThreadCpuMs(pid) - main) / count) * 1000 };
}

const stateOf = (i: number, agent: string) => ({
  instanceName: { workloadName: `o${i}`, agentName: agent, id: i.toString(16).padStart(8, '0') },
  executionState: { additionalInfo: '', ExecutionStateEnum: { case: 'running' as const, value: 0 } },
});

/** The server's messages, and (ours) Podman's event lines, sent to one agent process as shipped. */
async function serverRows(label: 'ours' | 'released', start: (url: string, name: string, env: NodeJS.ProcessEnv) => ChildProcess, bursts: number) {
  const env = fakePodmanWithLogs(false);
  const agentName = uniqueAgent('budget');
  const server = await FakeAnkaiosServer.start();
  const agent = start(server.url, agentName, env);
  const figures: Partial<Record<Row, number>> = {};
  /** What of it the main thread spent, where measured: the rest is V8's helper threads' (compiler, collector). */
  const mainThread: Partial<Record<Row, number>> = {};
  /** KiB of its anonymous memory the agent touches while idle, before the bursts. */
  let idleTouched: number | undefined;
  /** µs per state of another agent when they come one by one, as a fleet's do. */
  let spaced = Number.NaN;
  try {
    const stream = await server.nextStream(20_000);
    const latest = latestStates(stream);
    await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    stream.send({ FromServerEnum: { case: 'serverHello', value: {} } });
    await sleep(2000);
    const pid = agent.pid!;
    await settled(pid);
    idleTouched = await anonymousTouchedKiB(pid);
    // Each burst is sent twice: the first warms the code it runs (V8 compiles it at its first use), the second is priced.
    const twice = async (row: Row, count: number, burst: (round: number) => unknown) => {
      await perMessage(pid, count, () => burst(0));
      const { all, main } = await perMessageByThread(pid, count, () => burst(1));
      figures[row] = all;
      mainThread[row] = main;
    };
    await twice('stateOfOther', bursts, (round) => {
      for (let i = 0; i < bursts; i++)
        stream.send({ FromServerEnum: { case: 'updateWorkloadState', value: { workloadStates: [stateOf(i, `other_${round}`)] } } });
    });
    const hundreds = Math.ceil(bursts / 10);
    await twice('statesOfOthers100', hundreds, (round) => {
      for (let m = 0; m < hundreds; m++) {
        const workloadStates = Array.from({ length: 100 }, (_, i) => stateOf(m * 100 + i, `others_${round}`));
        stream.send({ FromServerEnum: { case: 'updateWorkloadState', value: { workloadStates } } });
      }
    });
    spaced = await spacedStates(pid, (i) =>
      stream.send({ FromServerEnum: { case: 'updateWorkloadState', value: { workloadStates: [stateOf(i, `spaced_${i % 29}`)] } } }),
    );
    const creates = (round: number) => {
      const specs = Array.from({ length: 50 }, (_, i) => busybox(`run${round}_${i}`, agentName));
      stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: specs.map(addedWorkload) } } });
      const running = () => specs.every((w) => latest.get(w.instanceName.workloadName) === 'Running(Ok)');
      // The released agent has been seen to leave some of such a burst unreported: priced by its CPU within 30 s.
      return label === 'ours' ? until(running, 300_000) : until(running, 30_000).catch(() => undefined);
    };
    await twice('create', 50, creates);
    const waiting = (round: number) =>
      Array.from({ length: bursts / 4 }, (_, i) => busybox(`wait${round}_${i}`, agentName, { dependencies: { never: 'Running' } }));
    const named = (round: number, state: string) => () => waiting(round).every((w) => latest.get(w.instanceName.workloadName) === state);
    const add = (round: number) => {
      for (const w of waiting(round)) stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: [addedWorkload(w)] } } });
      // The released agent has been seen to leave a third of such a burst unreported: priced by its CPU meanwhile.
      return label === 'ours' ? until(named(round, 'Pending(WaitingToStart)')) : until(named(round, 'Pending(WaitingToStart)'), 10_000).catch(() => undefined);
    };
    const remove = (round: number) => {
      for (const w of waiting(round))
        stream.send({ FromServerEnum: { case: 'updateWorkload', value: { deletedWorkloads: [{ instanceName: w.instanceName, dependencies: {} }] } } });
      // The released agent sends no Removed for a workload that never started: the server forgets it by itself.
      return label === 'ours' ? until(named(round, 'Removed')) : sleep(3000);
    };
    await perMessage(pid, bursts / 4, () => add(0));
    await perMessage(pid, bursts / 4, () => remove(0));
    figures.addWaiting = await perMessage(pid, bursts / 4, () => add(1));
    figures.deleteWaiting = await perMessage(pid, bursts / 4, () => remove(1));
    if (label === 'ours') {
      figures.eventLine = await eventLines(pid, env.FAKE_PODMAN_DIR!, bursts * 2);
      // 300 more running (100 by now): an event is to cost the same however many workloads the node runs.
      for (let round = 0; round < 3; round++) {
        const specs = Array.from({ length: 100 }, (_, i) => busybox(`many${round}_${i}`, agentName));
        stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: specs.map(addedWorkload) } } });
        await until(() => specs.every((w) => latest.get(w.instanceName.workloadName) === 'Running(Ok)'), 300_000);
      }
      figures.eventLineAmongMany = await eventLines(pid, env.FAKE_PODMAN_DIR!, bursts * 2);
    }
  } finally {
    agent.kill('SIGKILL');
    server.stop();
  }
  return { figures, mainThread, idleTouched, spaced };
}

/** How far apart the spaced messages come, and how many: a fleet's states reach each agent some tens of ms apart. */
const SPACED = { gapMs: 30, count: 200 };

/**
 * µs of `pid`'s CPU per message that `send(i)` sends, one every SPACED.gapMs, over its CPU idle for as long: each
 * comes to a process that has gone idle since the last, its caches cold, unlike a message of a burst.
 */
async function spacedStates(pid: number, send: (i: number) => void): Promise<number> {
  const span = SPACED.gapMs * SPACED.count;
  await settled(pid);
  const idleFrom = processCpuMs(pid);
  await sleep(span);
  const idle = processCpuMs(pid) - idleFrom;
  const from = processCpuMs(pid);
  for (let i = 0; i < SPACED.count; i++) {
    send(i);
    await sleep(SPACED.gapMs);
  }
  return ((processCpuMs(pid) - from - idle) / SPACED.count) * 1000;
}

/** The same for a bare Node HTTP/2 client that only reads the frames (as big as such a state's): Node's own floor. */
async function spacedBareHttp2(): Promise<number> {
  const client = "const s = require('node:http2').connect(process.argv[1]); s.request({ ':path': '/', ':method': 'POST' }).on('data', () => {});";
  const server = http2.createServer();
  const streams: http2.ServerHttp2Stream[] = [];
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    streams.push(stream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const child = spawn(process.execPath, ['-e', client, `http://127.0.0.1:${(server.address() as { port: number }).port}`], { stdio: 'ignore' });
  try {
    await until(() => streams.length > 0, 10_000);
    await sleep(1000);
    const frame = Buffer.alloc(160, 1);
    return await spacedStates(child.pid!, () => streams[0].write(frame));
  } finally {
    child.kill('SIGKILL');
    server.close();
  }
}

/** Podman's `start` event of a running container of the agent's, `count` times, on the fake podman's event stream. */
async function eventLines(pid: number, containers: string, count: number): Promise<number> {
  const [file] = readdirSync(containers).filter((f) => f.endsWith('.json'));
  const c = JSON.parse(readFileSync(path.join(containers, file), 'utf8')) as { Id: string; Names: string[]; Labels: Record<string, string> };
  const line = `${JSON.stringify({ ID: c.Id, Image: 'localhost/busybox:latest', Name: c.Names[0], Status: 'start', Time: new Date().toISOString(), Type: 'container', Attributes: c.Labels })}\n`;
  const feed = path.join(containers, '..', 'events');
  const burst = async () => {
    writeFileSync(feed, line.repeat(count), { flag: 'a' });
    await sleep(500);
  };
  await perMessage(pid, count, burst);
  return perMessage(pid, count, burst);
}

/** This process's CPU in ms (every thread's). */
const ownCpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** µs of this process's CPU per call of `work` (`count` calls, a warm-up round first). */
async function inProcess(count: number, work: (n: number) => Promise<unknown>): Promise<number> {
  await work(Math.ceil(count / 10));
  await sleep(200);
  const before = ownCpuMs();
  await work(count);
  return ((ownCpuMs() - before) / count) * 1000;
}

/** N calls, 8 at a time, of `call`. */
const eightAtOnce = (n: number, call: () => Promise<unknown>) => lastValueFrom(range(0, n).pipe(mergeMap(() => call(), 8)), { defaultValue: undefined });

async function libpodRow(count: number): Promise<number | undefined> {
  const folder = specFolder('ank-bench-libpod-');
  const socket = path.join(folder, 'podman.sock');
  const service = spawn('podman', ['system', 'service', '--time=0', `unix://${socket}`], { stdio: 'ignore' });
  try {
    await until(() => existsSync(socket), 20_000);
    const api = new Libpod(socket);
    try {
      return await inProcess(count, (n) => eightAtOnce(n, () => api.imageExists('localhost/busybox:latest', 10_000)));
    } finally {
      api.dispose();
    }
  } finally {
    service.kill('SIGTERM');
  }
}

async function cliRow(count: number): Promise<number> {
  const processes = new Processes();
  const cli = new Cli({ binary: 'true', processes, clock: asyncScheduler });
  try {
    return await inProcess(count, (n) => eightAtOnce(n, () => firstValueFrom(cli.run(['x'], { kind: 'query' }), { defaultValue: '' })));
  } finally {
    processes.dispose();
  }
}

/**
 * What this machine charges a process for a wake, work or none: a bare Node process woken every 2 s by a timer
 * that does nothing, its main thread's CPU per wake, and the memory it touches (to read the agent's against). On
 * a guest whose memory is slow to touch again after a second or two (one measured at ~20 µs a page:
 * bench/RESULTS.md), this alone is several ms, and every figure above of a process that waits between messages
 * carries its share.
 */
async function bareNodeWake(wakes: number): Promise<{ cpuMs: number; touched?: number }> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 2000)'], { stdio: 'ignore' });
  try {
    await sleep(3000);
    const before = mainThreadCpuMs(child.pid!);
    await sleep(wakes * 2000);
    return { cpuMs: (mainThreadCpuMs(child.pid!) - before) / wakes, touched: await anonymousTouchedKiB(child.pid!) };
  } finally {
    child.kill('SIGKILL');
  }
}

async function stateSentRow(count: number): Promise<number> {
  const state = { instanceName: { workloadName: 'w', agentName: 'a', id: 'f'.repeat(64) }, executionState: ExecutionState.running() };
  return inProcess(count, async (n) => {
    for (let i = 0; i < n; i++) frame(toServerBytes({ kind: 'updateWorkloadState', states: [state] }));
  });
}

export async function benchBudgets(quick: boolean): Promise<void> {
  const bursts = quick ? 2000 : 8000;
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  console.log(
    `\nThe hot path in budgets (the agent's own CPU per message, bursts of ${bursts / 4}–${bursts * 2}; budgets of a create's messages add up to ≤ 1.5 ms)`,
  );
  const args = (url: string, name: string) => ['-n', name, '-s', url, '-k', '-r', specFolder('ank-bench-budget-')];
  const ours = await serverRows('ours', (url, name, env) => spawn(BIN, [...args(url, name), '-x', withoutPodmanService()], { stdio: 'ignore', env }), bursts);
  const theirs = released ? await serverRows('released', (url, name, env) => spawn(released, args(url, name), { stdio: 'ignore', env }), bursts) : undefined;
  for (const row of ['stateOfOther', 'statesOfOthers100', 'addWaiting', 'deleteWaiting', 'eventLine', 'eventLineAmongMany', 'create'] as const)
    if (ours.figures[row] !== undefined) say(row, ours.figures[row], theirs?.figures[row], ours.mainThread[row]);
  const bareSpaced = await spacedBareHttp2();
  record({
    name: `UpdateWorkloadState: 1 state of another agent's workload, one every ${SPACED.gapMs} ms`,
    value: ours.spaced,
    unit: 'µs/msg',
    note: [
      theirs === undefined ? undefined : `released ${theirs.spaced.toFixed(0)} µs`,
      `a bare Node HTTP/2 client reading such frames ${bareSpaced.toFixed(0)} µs`,
      'no budget: what a fleet costs each agent',
    ]
      .filter((n) => n !== undefined)
      .join('; '),
  });
  const libpod = await libpodRow(quick ? 2000 : 8000);
  if (libpod !== undefined) say('libpodAnswer', libpod);
  say('cliCall', await cliRow(quick ? 1000 : 4000));
  say('stateSent', await stateSentRow(quick ? 20_000 : 100_000));
  const bare = await bareNodeWake(quick ? 4 : 10);
  record({
    name: 'the machine: a bare Node process woken every 2 s, CPU per wake',
    value: bare.cpuMs,
    unit: 'ms',
    note: "no work done: the price of a wake after 2 s idle; the fleet part's idle floor spent under 0.8 ms a wake on 2 × AMD EPYC",
  });
  // What a wake's CPU follows where memory is slow to touch again after idle: the pages it touches.
  for (const [label, kib] of [
    ['ours, idle', ours.idleTouched],
    ['released, idle', theirs?.idleTouched],
    ['a bare Node process woken every 2 s', bare.touched],
  ] as const)
    if (kib !== undefined) record({ name: `anonymous memory touched in 2.5 s: ${label}`, value: kib, unit: 'KiB' });
  const createPath = BUDGETS.addWaiting + 3 * BUDGETS.eventLine + 2 * BUDGETS.libpodAnswer + BUDGETS.cliCall + 2 * BUDGETS.stateSent;
  console.log(`  a create's messages within their budgets: ${createPath} µs (its UpdateWorkload, 3 event lines, 2 libpod answers, 1 CLI call, 2 states)`);
}
