// npm run bench: scheduling throughput, Podman call economy, reaction latency, agent overhead and
// Control Interface round trips. Prints a table and writes bench/results.json.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readdirSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { create } from '@bufbuild/protobuf';
import { EMPTY, Subject, firstValueFrom, of } from 'rxjs';
import { ResponseSchema } from '../proto/gen/ank_base_pb.js';
import { PodmanCli } from '../lib/drivers/podman-cli.js';
import { STATS_TTL_MS } from '../lib/drivers/metrics.js';
import { controlInterfaceFolder } from '../lib/drivers/run-folder.js';
import { builtInRuntimes } from '../bin/wiring.js';
import { ControlInterfaceHub } from '../spec/helpers/control-interfaces.js';
import { ExecutionState } from '../lib/execution-state.js';
import { silentLogger } from '../lib/logger.js';
import type { FromServer } from '../lib/messages.js';
import type { WorkloadSpec } from '../lib/workload.js';
import { instanceKey } from '../lib/workload.js';
import { runWorkloads } from '../streams/run-workloads.js';
import { ControlInterfaceClient } from '../spec/helpers/ci-client.js';
import { FakeRuntime } from '../spec/helpers/fake-runtime.js';
import { type AgentStream, FakeAnkaiosServer, addedWorkload, reportedStates } from '../spec/helpers/fake-server.js';
import { workload } from '../spec/helpers/fixtures.js';
import { benchEndToEnd } from './e2e.js';
import { benchPulls } from './pulls.js';
import { cpuMs, figures, median, p95, record, sleep } from './report.js';
import { IMAGE, PodmanAgent, SLEEP_UNTIL_STOPPED, busybox, cleanup, kubePod, requirePodman, spec, uniqueAgent } from '../spec/helpers/podman.js';

async function until(condition: () => boolean, timeoutMs = 120_000): Promise<void> {
  for (let waited = 0; !condition(); waited += 20) {
    if (waited > timeoutMs) throw new Error('timed out');
    await sleep(20);
  }
}
/** The agent exactly as shipped: run as a program, so that its Node options (the first line of the file) apply. */
const BIN = path.resolve('bin/ank-agent.js');

// 1. Scheduling throughput on the pure pipelines ---------------------------------------------------

/** N workloads in 10 layers; each depends on one of the layer before, with running or succeeded. */
function layeredDag(n: number): WorkloadSpec[] {
  const width = Math.max(1, Math.floor(n / 10));
  return Array.from({ length: n }, (_, i) => {
    const layer = Math.floor(i / width);
    const dependencies = layer === 0 ? {} : { [`w${(layer - 1) * width + (i % width)}`]: (layer % 2 ? 'Running' : 'Succeeded') as 'Running' | 'Succeeded' };
    return workload(`w${i}`, { dependencies });
  });
}

function scheduling(n: number): { create: number; remove: number } {
  const specs = layeredDag(n);
  let creates = 0;
  let deletes = 0;
  const runtime = new FakeRuntime({
    create: (spec) => {
      creates++;
      return of(`id-${spec.instanceName.workloadName}`);
    },
    states: () => of(ExecutionState.running(), ExecutionState.succeeded()),
    delete: () => {
      deletes++;
      return EMPTY;
    },
  });
  const input = new Subject<FromServer>();
  const sub = runWorkloads(input, { agentName: 'agent_A', runtimes: new Map([['fake', runtime]]), prepare: () => of({}), release: () => EMPTY }).subscribe();
  const t0 = performance.now();
  input.next({ kind: 'serverHello', added: specs });
  const t1 = performance.now();
  if (creates !== n) throw new Error(`only ${creates} of ${n} created`);
  const dependents = new Map<string, Record<string, 'NotPendingNorRunning'>>();
  for (const s of specs)
    for (const [dep, c] of Object.entries(s.dependencies))
      if (c === 'Running') dependents.set(dep, { ...dependents.get(dep), [s.instanceName.workloadName]: 'NotPendingNorRunning' });
  input.next({
    kind: 'updateWorkload',
    added: [],
    deleted: specs.map((s) => ({ instanceName: s.instanceName, dependencies: dependents.get(s.instanceName.workloadName) ?? {} })),
  });
  const t2 = performance.now();
  if (deletes !== n) throw new Error(`only ${deletes} of ${n} deleted`);
  sub.unsubscribe();
  return { create: t1 - t0, remove: t2 - t1 };
}

function benchScheduling(): void {
  console.log('\n1. Scheduling throughput (pure pipelines, in-memory runtime; layered dependency DAG)');
  // Warm the JIT up first, or the smallest N measures compilation.
  for (let i = 0; i < 3; i++) scheduling(5000);
  let previous: number | undefined;
  for (const n of [100, 1000, 10_000]) {
    const runs = Array.from({ length: n === 10_000 ? 3 : 5 }, () => scheduling(n));
    const create = median(runs.map((r) => r.create));
    const remove = median(runs.map((r) => r.remove));
    record({ name: `ServerHello → last create, N=${n}`, value: create, unit: 'ms', note: `${Math.round(n / (create / 1000))} ops/s` });
    record({ name: `UpdateWorkload deleting all → last delete, N=${n}`, value: remove, unit: 'ms', note: `${Math.round(n / (remove / 1000))} ops/s` });
    if (previous !== undefined) record({ name: `growth of create time for 10× N`, value: create / previous, unit: '×', target: '≈10 (linear)' });
    previous = create;
  }
}

// 2. Podman call economy -------------------------------------------------------------------------

/** CPU time (ms) of the children this process waited for: what the podman calls it ran cost. */
const childCpuMs = () => cpuMs(process.pid).children;

async function benchEconomy(idleSeconds: number): Promise<void> {
  console.log(`\n2. Podman call economy (real Podman, sleeping busybox workloads, steady state over ${idleSeconds} s)`);
  for (const events of [true, false]) {
    for (const n of [1, 10, 50]) {
      const agent = new PodmanAgent(uniqueAgent('bench'), undefined, new PodmanCli(), { events });
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

// 3. Reaction latency ----------------------------------------------------------------------------

const finishedAt = (name: string) =>
  Number(execFileSync('podman', ['inspect', '--format', '{{.State.FinishedAt.UnixMilli}}', name], { encoding: 'utf8' }).trim());

/** A workload that sleeps `script` and exits 0, on a runtime; when its container finished, by its name. */
interface ExitRuntime {
  readonly make: (name: string, agentName: string, script: string) => WorkloadSpec;
  readonly finishedAt: (name: string) => number;
}
const ON_PODMAN: ExitRuntime = { make: (name, agentName, script) => busybox(name, agentName, { script }), finishedAt };

/** Exit → Succeeded reported (ms) for `count` workloads that exit one after another, the pipelines in-process. */
async function exitLatencies(events: boolean, count: number, { make, finishedAt: finished }: ExitRuntime = ON_PODMAN): Promise<number[]> {
  const agentName = uniqueAgent('lat');
  const input = new Subject<FromServer>();
  const seen = new Map<string, number>();
  const sub = runWorkloads(input, {
    agentName,
    runtimes: builtInRuntimes(silentLogger, new PodmanCli(), { events }),
    prepare: () => of({}),
    release: () => EMPTY,
  }).subscribe((states) => {
    for (const s of states) if (s.executionState.state === 'Succeeded') seen.set(s.instanceName.workloadName, Date.now());
  });
  try {
    const specs = Array.from({ length: count }, (_, i) => make(`exit${i}`, agentName, `sleep ${(2 + i * 0.37).toFixed(2)}`));
    input.next({ kind: 'serverHello', added: specs });
    await until(() => seen.size === count);
    return specs.map((s) => seen.get(s.instanceName.workloadName)! - finished(instanceKey(s.instanceName)));
  } finally {
    sub.unsubscribe();
    cleanup(agentName);
  }
}

async function benchLatency(): Promise<void> {
  console.log('\n3. Reaction latency (real Podman: container exit → Succeeded reported; 20 exits)');
  for (const events of [false, true]) {
    const l = await exitLatencies(events, 20);
    const how = events ? "Podman's events" : 'events off: one poll a second';
    record({ name: `exit noticed, median (${how})`, value: median(l), unit: 'ms', target: events ? '<50' : undefined });
    record({ name: `exit noticed, p95 (${how})`, value: p95(l), unit: 'ms', target: events ? '<100' : undefined });
  }
  // The restart itself: without the crash-loop back-off, which would space these quick exits out.
  const agent = new PodmanAgent(uniqueAgent('restart'), undefined, new PodmanCli(), { backoff: { firstDelayMs: 0, maxDelayMs: 0, resetAfterMs: 0 } });
  try {
    const w = busybox('phoenix', agent.agentName, { script: 'sleep 1', restartPolicy: 'Always' });
    agent.send({ kind: 'serverHello', added: [w] });
    const restarts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const runs = () => agent.history('phoenix').filter((h) => h === 'Running(Ok)').length;
      const before = runs();
      await until(() => agent.history('phoenix').filter((h) => h === 'Succeeded(Ok)').length > i);
      const finished = finishedAt(instanceKey(w.instanceName));
      await until(() => runs() > before || runs() > i + 1);
      restarts.push(Date.now() - finished);
    }
    record({ name: 'ALWAYS (no back-off): exit → container reported running again, median', value: median(restarts), unit: 'ms', target: '<350' });
  } finally {
    agent.stop();
  }
  const direct = Array.from({ length: 5 }, (_, i) => {
    const t = performance.now();
    execFileSync('podman', ['run', '-d', '--name', `bench-direct-${process.pid}-${i}`, 'localhost/busybox:latest', '/bin/true']);
    const ms = performance.now() - t;
    execFileSync('podman', ['rm', '-f', `bench-direct-${process.pid}-${i}`]);
    return ms;
  });
  record({ name: '`podman run -d` alone (for comparison), median', value: median(direct), unit: 'ms' });
}

// 4. Agent overhead ------------------------------------------------------------------------------

const rssKiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
/** A process's own CPU time in clock ticks (1/100 s). */
const cpuTicks = (pid: number) => cpuMs(pid).own / 10;

/** The median RSS (MiB) and the CPU (% of a core) of a process over `seconds` of idle. */
async function idleFigures(pid: number, seconds: number): Promise<{ rss: number; cpu: number }> {
  const ticks = cpuTicks(pid);
  const rss: number[] = [];
  for (let s = 0; s < seconds; s++) {
    await sleep(1000);
    rss.push(rssKiB(pid));
  }
  return { rss: median(rss) / 1024, cpu: ((cpuTicks(pid) - ticks) / 100 / seconds) * 100 };
}

/** The floor: Node with the gRPC client only, saying one message on a ConnectAgent stream and idling. */
function writeBaseline(run: string): string {
  const baseline = `import * as grpc from '@grpc/grpc-js';
const client = new grpc.Client(process.argv[2], grpc.credentials.createInsecure());
const call = client.makeBidiStreamRequest('/grpc_api.AgentConnection/ConnectAgent', (b) => b, (b) => b);
call.on('error', () => undefined);
// AgentHello{agentName: 'b', protocolVersion: '1.0.1'}
call.write(Buffer.from([0x0a, 0x0a, 0x0a, 0x01, 0x62, 0x12, 0x05, 0x31, 0x2e, 0x30, 0x2e, 0x31]));`;
  const file = path.join(run, 'baseline.mjs');
  writeFileSync(file, baseline);
  symlinkSync(path.resolve('node_modules'), path.join(run, 'node_modules'));
  return file;
}

async function benchOverhead(idleSeconds: number): Promise<void> {
  console.log(`\n4. Agent overhead (the real agent process against a fake server; idle for ${idleSeconds} s)`);
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-'));
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

// 7. A log flood to a server that does not read ------------------------------------------------------

async function benchLogFlood(seconds: number): Promise<void> {
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

// 10. Log requests: a storm of request + cancel pairs, and a fan-out to 200 workloads -----------------

const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
/** The children of `pid` that are zombies (exited, not yet reaped). */
const zombies = (pid: number) =>
  readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
        return stat[0] === 'Z' && Number(stat[1]) === pid;
      } catch {
        return false;
      }
    }).length;

/**
 * The fake podman of the scaling bench, with a `podman logs` that prints one line and waits (a shell and a
 * sleep, so hundreds of streams cost little): the agent's own cost is what is measured.
 */
function fakePodmanWithLogs(logsWait = true): NodeJS.ProcessEnv {
  const fake = mkdtempSync(path.join(os.tmpdir(), 'ank-fake-podman-'));
  const state = path.join(fake, 'containers');
  execFileSync('mkdir', [state]);
  writeFileSync(
    path.join(fake, 'podman'),
    `#!/bin/sh\nif [ "$1" = logs ]; then echo "a line of $*"; ${logsWait ? 'exec sleep 3600' : 'exit 0'}; fi\nexec ${process.execPath} ${path.resolve('bench/fake-podman.mjs')} "$@"\n`,
    { mode: 0o755 },
  );
  return { ...process.env, PATH: `${fake}:${process.env.PATH ?? ''}`, FAKE_PODMAN_DIR: state };
}

/** The agent as shipped on the fake podman of fakePodmanWithLogs, with `n` workloads running and settled. */
async function settledAgent(prefix: string, n: number, args: readonly string[] = []) {
  const run = mkdtempSync(path.join(os.tmpdir(), `ank-bench-${prefix}-`));
  const agentName = uniqueAgent(prefix);
  const server = await FakeAnkaiosServer.start();
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run, ...args], { stdio: 'ignore', env: fakePodmanWithLogs() });
  const stop = () => {
    child.kill('SIGKILL');
    server.stop();
  };
  try {
    const stream = await server.nextStream();
    const latest = latestStates(stream);
    const specs = Array.from({ length: n }, (_, i) => busybox(`w${i}`, agentName));
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
    await until(() => specs.every((s) => latest.get(s.instanceName.workloadName) === 'Running(Ok)'), 300_000);
    await sleep(SETTLE_MS);
    return { pid: child.pid!, stream, specs, stop };
  } catch (err) {
    stop();
    throw err;
  }
}

async function benchLogRequests(): Promise<void> {
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

// 8. Side by side with the released agent (ANKAIOS_BIN) ---------------------------------------------

/** Starts an agent process against `url` as `name` in `run`; `env` holds the PATH with the podman wrapper. */
type AgentStart = (url: string, name: string, run: string, env: NodeJS.ProcessEnv) => ChildProcess;

/** A `podman` on PATH that logs every call and runs the real one: counts the calls of any agent. */
function podmanWrapper(folder: string): { env: NodeJS.ProcessEnv; calls: () => number } {
  const log = path.join(folder, 'podman-calls.log');
  const real = execFileSync('sh', ['-c', 'command -v podman'], { encoding: 'utf8' }).trim();
  writeFileSync(log, '');
  writeFileSync(path.join(folder, 'podman'), `#!/bin/sh\necho "$1" >> '${log}'\nexec '${real}' "$@"\n`, { mode: 0o755 });
  return { env: { ...process.env, PATH: `${folder}:${process.env.PATH ?? ''}` }, calls: () => readFileSync(log, 'utf8').split('\n').filter(Boolean).length };
}

async function measureAgent(label: string, start: AgentStart, idleSeconds: number): Promise<void> {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-side-'));
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

async function benchReleased(idleSeconds: number): Promise<void> {
  const released = path.join(process.env.ANKAIOS_BIN ?? '', 'ank-agent');
  console.log(`\n8. Side by side with the released agent (${released}), same fake server, same workloads; idle ${idleSeconds} s`);
  await measureAgent('ours', (url, name, run, env) => spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), idleSeconds);
  await measureAgent('released', (url, name, run, env) => spawn(released, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), idleSeconds);
}

// 11. What a log line costs: the shipped process, real Podman, a server that reads everything ------------

/** Lines the log workload prints at once (then it sleeps): what every agent reads and sends. */
const LOG_LINES = 200_000;
const LOG_SCRIPT = `seq 1 ${LOG_LINES} | sed 's/$/ a line of the kind a workload prints, neither short nor long/'; sleep 3600`;

/** One agent serving a follow LogsRequest of LOG_LINES lines: its CPU per 100 000 entries, entries per second, peak RSS. */
async function logCost(start: AgentStart): Promise<{ cpu: number; perSecond: number; rss: number }> {
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-cost-'));
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

async function benchLogCost(): Promise<void> {
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

// 12. The metrics endpoint: what it costs idle, and one scrape of 1 000 workloads ------------------------

async function benchMetrics(idleSeconds: number): Promise<void> {
  console.log(`\n12. Metrics endpoint (the real agent process on the fake podman; idle ${idleSeconds} s)`);
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-metrics-'));
  const idle = async (args: string[]) => {
    const server = await FakeAnkaiosServer.start();
    const child = spawn(BIN, ['-n', uniqueAgent('mx'), '-s', server.url, '-k', '-r', run, ...args], {
      stdio: 'ignore',
      env: fakePodmanWithLogs(),
    });
    try {
      await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
      await sleep(3000);
      return await idleFigures(child.pid!, idleSeconds);
    } finally {
      child.kill('SIGKILL');
      server.stop();
    }
  };
  const port = 19_000 + (process.pid % 1000);
  const without = await idle([]);
  const withIt = await idle(['--metrics', String(port)]);
  record({ name: 'idle RSS without --metrics', value: without.rss, unit: 'MiB' });
  record({ name: 'idle RSS with --metrics (never scraped)', value: withIt.rss, unit: 'MiB' });
  record({
    name: 'idle CPU without / with --metrics',
    value: withIt.cpu - without.cpu,
    unit: '% core',
    note: `${without.cpu.toFixed(2)} / ${withIt.cpu.toFixed(2)}`,
  });
  // One scrape of an agent with 1 000 workloads.
  const { pid, stop } = await settledAgent('mx', 1000, ['--metrics', String(port)]);
  try {
    const scrape = async () => {
      const ticks = cpuTicks(pid);
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return { cpuMs: (cpuTicks(pid) - ticks) * 10, bytes: text.length };
    };
    const first = await scrape();
    await sleep(STATS_TTL_MS + 500);
    // Ticks are 10 ms: the mean of 20 scrapes in a row, one at a time.
    const next: Array<{ cpuMs: number; bytes: number }> = [];
    for (let i = 0; i < 20; i++) next.push(await scrape());
    record({
      name: 'one scrape of 1 000 workloads (the first, prom-client loaded before), agent CPU',
      value: first.cpuMs,
      unit: 'ms',
      note: `${first.bytes} bytes`,
    });
    record({
      name: 'one scrape of 1 000 workloads, agent CPU, mean of 20',
      value: next.reduce((sum, n) => sum + n.cpuMs, 0) / next.length,
      unit: 'ms',
      target: '≤50',
    });
  } finally {
    stop();
  }
}

// 16. Soak: memory over a long churn of updates and log requests ------------------------------------

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
async function benchSoak(minutes: number): Promise<void> {
  console.log(`\n16. Soak (the real agent process, real Podman, ${minutes} min: an update every 3 s, a log request every 10 s)`);
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-soak-'));
  const agentName = uniqueAgent('soak');
  const server = await FakeAnkaiosServer.start();
  const port = 19_500 + (process.pid % 400);
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run, '--metrics', String(port)], { stdio: 'ignore' });
  try {
    const churn = await churning(await server.nextStream(), agentName);
    const heapUsed = async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN) / 2 ** 20;
    };
    const samples: Array<{ at: number; rss: number; heap: number }> = [];
    const started = performance.now();
    let updates = 0;
    while (performance.now() - started < minutes * 60_000) {
      updates += 1;
      if (churn.step()) samples.push({ at: (performance.now() - started) / 60_000, rss: rssKiB(child.pid!) / 1024, heap: await heapUsed() });
      await sleep(3000);
    }
    await until(churn.allRunning, 60_000);
    const settled = samples.filter((x) => x.at >= Math.min(5, minutes / 2));
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
  } finally {
    child.kill('SIGKILL');
    server.stop();
    cleanup(agentName);
  }
}

// 17. What the agent's heap holds after a long churn, by kind: heap snapshots compared ------------------------

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
 * The agent as shipped on the fake podman, 10 workloads, one updated every 250 ms and a log request with every
 * third update; heap snapshots (Node's --heapsnapshot-signal) after `warm` updates and after `more` further
 * ones. What grows between them is what a leak would hold: the objects, strings, arrays and closures; V8's
 * compiled code grows while it optimises more of the agent, and levels off.
 */
async function benchHeap(warm: number, more: number): Promise<void> {
  console.log(`\n17. Heap after churn (the real agent process, fake podman; snapshots after ${warm} and ${warm + more} updates)`);
  const folder = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-heap-'));
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
    const snapshot = async () => {
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
          return heapByType(file);
        } catch (err) {
          if (waited > 120_000) throw err;
          await sleep(1000);
        }
      }
    };
    await churn(warm);
    const first = await snapshot();
    await churn(more);
    const second = await snapshot();
    const grown = (types: string[]) => types.reduce((sum, t) => sum + ((second.get(t)?.bytes ?? 0) - (first.get(t)?.bytes ?? 0)), 0) / 1024;
    record({
      name: `heap: objects, strings, arrays, closures grown over ${more} updates`,
      value: grown(['object', 'string', 'concatenated string', 'sliced string', 'array', 'closure']),
      unit: 'KiB',
      target: '≈0',
    });
    record({ name: `heap: V8's compiled code grown over the same`, value: grown(['code']), unit: 'KiB' });
  } finally {
    child.kill('SIGKILL');
    server.stop();
  }
}

// 18. containerd: exits seen, and what watching idle workloads costs ---------------------------------------

/** When containerd says a container finished (ms, wall clock). */
const containerdFinishedAt = (name: string) =>
  Date.parse(execFileSync('nerdctl', ['inspect', '--format', '{{.State.FinishedAt}}', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());

/** A containerd workload of the local busybox image running `sh -c <script>`. */
const onContainerd = (name: string, agentName: string, script: string) =>
  spec(name, agentName, 'containerd', `image: ${IMAGE}\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(script)}]\n`);

/**
 * Real containerd through nerdctl, the workload pipelines in-process (as part 3): exit → Succeeded reported,
 * on containerd's events and with them off (one `nerdctl ps` a second, as the released agent's poll without its
 * `inspect`); then the nerdctl processes a second that watching 50 idle workloads costs (released: 2, a `ps` and
 * an `inspect`).
 */
async function benchContainerd(count: number, idleSeconds: number): Promise<void> {
  console.log(`\n18. containerd (real containerd, nerdctl; ${count} exits; 50 idle workloads for ${idleSeconds} s)`);
  for (const events of [false, true]) {
    const latencies = await exitLatencies(events, count, { make: onContainerd, finishedAt: containerdFinishedAt });
    const how = events ? "containerd's events" : 'events off: one nerdctl ps a second';
    record({ name: `containerd: exit noticed, median (${how})`, value: median(latencies), unit: 'ms', target: events ? '<50' : undefined });
    record({ name: `containerd: exit noticed, p95 (${how})`, value: p95(latencies), unit: 'ms', target: events ? '<100' : undefined });
  }
  const nerdctl = new PodmanCli({ binary: 'nerdctl' });
  const agent = new PodmanAgent(uniqueAgent('ctrdidle'), undefined, new PodmanCli(), { nerdctl });
  try {
    const idle = Array.from({ length: 50 }, (_, i) => onContainerd(`idle${i}`, agent.agentName, SLEEP_UNTIL_STOPPED));
    agent.send({ kind: 'serverHello', added: idle });
    await until(() => idle.every((w) => agent.history(w.instanceName.workloadName).includes('Running(Ok)')), 120_000);
    await sleep(2000);
    const before = nerdctl.calls;
    await sleep(idleSeconds * 1000);
    record({
      name: 'containerd: nerdctl processes a second, 50 idle workloads',
      value: (nerdctl.calls - before) / idleSeconds,
      unit: '/s',
      note: 'released: 2/s',
    });
  } finally {
    agent.stop();
  }
}

// 14. --debug: what tracing costs when off, and when on ---------------------------------------------------

async function benchTracing(n: number, rounds: number): Promise<void> {
  console.log(`\n14. --debug (the real agent process on the fake podman; a burst of ${n} creates, median of ${rounds})`);
  /** Agent CPU from a ServerHello with `n` workloads until all are Running(Ok) at the server. */
  const burst = async (args: readonly string[]) => {
    const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-trace-'));
    const agentName = uniqueAgent('trace');
    const server = await FakeAnkaiosServer.start();
    // What it traces goes to stderr, here to nowhere: the cost measured is the agent's own.
    const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run, ...args], { stdio: 'ignore', env: fakePodmanWithLogs() });
    try {
      const stream = await server.nextStream();
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      const latest = latestStates(stream);
      const specs = Array.from({ length: n }, (_, i) => busybox(`w${i}`, agentName));
      const ticks = cpuTicks(child.pid!);
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
      await until(() => specs.every((s) => latest.get(s.instanceName.workloadName) === 'Running(Ok)'), 300_000);
      return (cpuTicks(child.pid!) - ticks) * 10;
    } finally {
      child.kill('SIGKILL');
      server.stop();
    }
  };
  const medianOf = async (args: readonly string[]) => {
    const runs: number[] = [];
    for (let i = 0; i < rounds; i++) runs.push(await burst(args));
    return median(runs);
  };
  const off = await medianOf([]);
  // The tracer in place with every stage filtered out: what each tracing point costs when it says nothing.
  const filtered = await medianOf(['--debug=no-such-stage']);
  const all = await medianOf(['--debug']);
  record({ name: `agent CPU for ${n} creates, tracing off`, value: off, unit: 'ms' });
  record({
    name: `agent CPU for ${n} creates, --debug of a stage that says nothing`,
    value: filtered,
    unit: 'ms',
    note: `${((filtered / off - 1) * 100).toFixed(1)} %`,
  });
  record({ name: `agent CPU for ${n} creates, --debug (every stage)`, value: all, unit: 'ms', note: `${((all / off - 1) * 100).toFixed(1)} %` });
}

// 13. Health checks and crash loops (real Podman, the real agent process) -------------------------------

/** The CPU time of a process's waited-for children, in s. */
const childCpu = (pid: number) => cpuMs(pid).children / 1000;

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

async function benchHealth(crashSeconds: number): Promise<void> {
  console.log(`\n13. Health checks and crash loops (real Podman; a crash loop watched ${crashSeconds} s with and without the back-off)`);
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-health-'));
  const agentName = uniqueAgent('health');
  const server = await FakeAnkaiosServer.start();
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run], { stdio: 'ignore' });
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
    const podmanCpu = childCpu(child.pid!);
    await sleep(20_000);
    record({ name: 'one health check: agent CPU', value: ((cpuTicks(child.pid!) - ticks) * 10) / 40, unit: 'ms', note: 'idle agent, two checks a second' });
    record({ name: 'one health check: podman CPU', value: ((childCpu(child.pid!) - podmanCpu) * 1000) / 40, unit: 'ms' });
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
    child.kill('SIGKILL');
    server.stop();
    cleanup(agentName);
  }
  for (const backoff of [true, false]) {
    const name = uniqueAgent('crash');
    const config = path.join(run, `${name}.toml`);
    writeFileSync(config, `version = 'v1'\n${backoff ? '' : 'crash_loop_backoff = { first_delay = 0 }\n'}`);
    const folder = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-crash-'));
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

// 5. Control Interface round trip ----------------------------------------------------------------

async function benchControlInterface(count: number): Promise<void> {
  console.log('\n5. Control Interface round trip (FIFOs → agent → fake server → agent → FIFOs)');
  const io = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-ci-'));
  const hub = new ControlInterfaceHub(io, silentLogger);
  const spec = {
    ...workload('bench'),
    controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] },
  };
  // The fake server answers every request at once.
  const answering = hub.requests$.subscribe((r) =>
    hub.deliver(create(ResponseSchema, { requestId: r.requestId, ResponseContent: { case: 'completeStateResponse', value: {} } })),
  );
  const { controlInterfacePath } = await firstValueFrom(hub.prepare(spec));
  const client = new ControlInterfaceClient(controlInterfacePath!);
  client.hello();
  await client.next();
  const rtts: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    client.askState(`r${i}`, 'desiredState');
    await client.next();
    rtts.push(performance.now() - t);
  }
  const seconds = (performance.now() - t0) / 1000;
  record({ name: `round trip, median (${count} sequential requests)`, value: median(rtts), unit: 'ms' });
  record({ name: 'requests per second, one at a time', value: count / seconds, unit: '/s' });
  client.close();
  answering.unsubscribe();
  hub.closeAll();
}

/** What a workload writing garbage into its Control Interface costs the agent, per MiB. */
/**
 * What a workload's garbage costs the running agent: 16 MiB written into its Control Interface output FIFO
 * (blocking writes: they go as fast as the agent reads), timed, and the agent's CPU for them.
 */
async function benchFraming(): Promise<void> {
  console.log('\nControl Interface framing under garbage (written into a FIFO of the running agent)');
  const mib = 1024 * 1024;
  const inputs: Array<[string, Buffer]> = [
    ['the crafted 0x88 0x7f pattern', Buffer.from(Uint8Array.from({ length: mib }, (_, i) => (i % 2 === 0 ? 0x88 : 0x7f)))],
    ['random bytes', Buffer.from(Uint8Array.from({ length: mib }, () => Math.floor(Math.random() * 256)))],
  ];
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-framing-'));
  const agentName = uniqueAgent('framing');
  const server = await FakeAnkaiosServer.start();
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run], { stdio: 'ignore' });
  try {
    const stream = await server.nextStream();
    const noisy = {
      ...busybox('noisy', agentName),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] },
    };
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(noisy)] } } });
    await until(() => reportedStates(stream).some(([w, , st]) => w === 'noisy' && st === 'Running(Ok)'));
    const output = path.join(controlInterfaceFolder(path.join(run, `${agentName}_io`), noisy), 'output');
    for (const [name, chunk] of inputs) {
      const fd = openSync(output, 'w');
      const ticks = cpuTicks(child.pid!);
      const t = performance.now();
      for (let i = 0; i < 16; i++) writeSync(fd, chunk);
      closeSync(fd);
      // The last bytes are read once the writes returned, the pipe's 64 KiB at most.
      const seconds = (performance.now() - t) / 1000;
      record({
        name: `framing of ${name} in the running agent`,
        value: 16 / seconds,
        unit: 'MiB/s',
        note: `agent CPU ${((cpuTicks(child.pid!) - ticks) * 10) / 16} ms per MiB`,
      });
    }
  } finally {
    child.kill('SIGKILL');
    server.stop();
    cleanup(agentName);
  }
}

/** Start-up: `--version` beside `node -e 0`; process start → AgentHello beside a Node + gRPC client and the released agent. */
async function benchStartup(): Promise<void> {
  console.log('\nStart-up (10 runs each, alternating; medians)');
  const timed = (command: string, args: string[]) => {
    const t = performance.now();
    execFileSync(command, args, { stdio: 'ignore' });
    return performance.now() - t;
  };
  const node: number[] = [];
  const version: number[] = [];
  for (let i = 0; i < 10; i++) {
    node.push(timed(process.execPath, ['-e', '0']));
    version.push(timed(BIN, ['--version']));
  }
  record({ name: 'node -e 0', value: median(node), unit: 'ms' });
  record({ name: 'ank-agent --version', value: median(version), unit: 'ms', target: `≤${(1.3 * median(node)).toFixed(0)} (1.3 × node -e 0)` });
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-start-'));
  const floorFile = writeBaseline(run);
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  type Start = [string, (url: string, port: number, name: string) => ChildProcess];
  const starts: Start[] = [
    ['ours', (url, _port, name) => spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore' })],
    ['Node + gRPC client', (_url, port) => spawn(process.execPath, [floorFile, `127.0.0.1:${port}`], { stdio: 'ignore' })],
  ];
  if (released) starts.push(['released', (url, _port, name) => spawn(released, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore' })]);
  const times = new Map<string, number[]>(starts.map(([label]) => [label, []]));
  for (let i = 0; i < 10; i++) {
    for (const [label, start] of starts) {
      const server = await FakeAnkaiosServer.start();
      const t = performance.now();
      const child = start(server.url, server.port, `start_${i}`);
      await (await server.nextStream()).waitFor(() => true);
      times.get(label)!.push(performance.now() - t);
      child.kill('SIGKILL');
      server.stop();
    }
  }
  const floor = median(times.get('Node + gRPC client')!);
  for (const [label] of starts)
    record({
      name: `${label}: process start → first message at the server`,
      value: median(times.get(label)!),
      unit: 'ms',
      target: label === 'ours' ? `≤${(0.8 * floor).toFixed(0)} (0.8 × Node + gRPC client)` : undefined,
    });
}

// ------------------------------------------------------------------------------------------------

const quick = process.argv.includes('--quick');
// 9. Scaling: hundreds of workloads on a file-backed fake podman (bench/fake-podman.mjs) ----------------

async function benchScaling(idleSeconds: number): Promise<void> {
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  console.log(
    `\n9. Scaling (the real agent process${released ? ', then the released one' : ''}, a fake podman that keeps containers as files; ` +
      `settled ${SETTLE_MS / 1000} s, then idle ${idleSeconds} s)`,
  );
  const run = mkdtempSync(path.join(os.tmpdir(), 'ank-bench-scale-'));
  const server0 = await FakeAnkaiosServer.start();
  const floor = spawn(process.execPath, [writeBaseline(run), `127.0.0.1:${server0.port}`], { stdio: 'ignore' });
  await (await server0.nextStream()).waitFor(() => true);
  await sleep(2000);
  const floorRss = (await idleFigures(floor.pid!, Math.min(idleSeconds, 10))).rss;
  floor.kill('SIGKILL');
  server0.stop();
  record({ name: 'floor: Node + gRPC client, idle RSS, median', value: floorRss, unit: 'MiB' });
  const ours = await scaleAgent('ours', (url, name, env) => spawn(BIN, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), {
    idleSeconds,
    floorRss,
  });
  record({ name: 'ours: idle RSS with no workload / floor', value: ours.get(0)!.rss / floorRss, unit: '×', target: '≤1.15' });
  if (released)
    await scaleAgent('released', (url, name, env) => spawn(released, ['-n', name, '-s', url, '-k', '-r', run], { stdio: 'ignore', env }), { idleSeconds });
}

/** How long after the last workload runs (or the agent started) the idle figures begin: the burst's garbage is collected by then. */
const SETTLE_MS = 15_000;

/** One agent at 0 / 50 / 500 / 1 000 workloads on the fake podman: idle figures, and the times of the bursts. */
async function scaleAgent(
  label: string,
  start: (url: string, name: string, env: NodeJS.ProcessEnv) => ChildProcess,
  { idleSeconds, floorRss }: { idleSeconds: number; floorRss?: number },
): Promise<Map<number, { rss: number; cpu: number }>> {
  const byN = new Map<number, { rss: number; cpu: number }>();
  for (const n of [0, 50, 500, 1000]) {
    const fake = mkdtempSync(path.join(os.tmpdir(), 'ank-fake-podman-'));
    symlinkSync(path.resolve('bench/fake-podman.mjs'), path.join(fake, 'podman'));
    const state = path.join(fake, 'containers');
    execFileSync('mkdir', [state]);
    const env = { ...process.env, PATH: `${fake}:${process.env.PATH ?? ''}`, FAKE_PODMAN_DIR: state };
    const agentName = uniqueAgent('scale');
    const server = await FakeAnkaiosServer.start();
    const child = start(server.url, agentName, env);
    try {
      const stream = await server.nextStream();
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      const latest = latestStates(stream);
      const specs = Array.from({ length: n }, (_, i) => busybox(`w${i}`, agentName));
      const t = performance.now();
      const ticks = cpuTicks(child.pid!);
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: specs.map(addedWorkload) } } });
      await until(() => specs.every((s) => latest.get(s.instanceName.workloadName) === 'Running(Ok)'), 300_000);
      if (n >= 100) {
        const ms = performance.now() - t;
        record({ name: `${label}: ServerHello → ${n} workloads Running(Ok) at the server`, value: ms, unit: 'ms', note: `${(ms / n).toFixed(1)} ms each` });
        record({ name: `${label}: agent CPU for the burst of ${n} creates`, value: (cpuTicks(child.pid!) - ticks) / 100, unit: 's' });
      }
      await sleep(SETTLE_MS);
      const containers = readdirSync(state).length;
      writeFileSync(path.join(fake, 'calls'), '');
      const figures = await idleFigures(child.pid!, idleSeconds);
      const calls = readFileSync(path.join(fake, 'calls'), 'utf8').length / idleSeconds;
      byN.set(n, figures);
      const rssTarget = n === 0 && floorRss ? `≤${(1.15 * floorRss).toFixed(1)} (1.15 × floor)` : undefined;
      record({ name: `${label}: idle RSS with ${n} workloads, median`, value: figures.rss, unit: 'MiB', target: rssTarget });
      record({ name: `${label}: idle CPU with ${n} workloads`, value: figures.cpu, unit: '% core', target: n === 1000 && floorRss ? '≤0.5' : undefined });
      record({ name: `${label}: podman calls per second with ${n} workloads`, value: calls, unit: '/s', note: `${containers} containers` });
      if (n >= 100) {
        const t2 = performance.now();
        stream.send({
          FromServerEnum: { case: 'updateWorkload', value: { deletedWorkloads: specs.map((s) => ({ instanceName: s.instanceName, dependencies: {} })) } },
        });
        await until(() => specs.every((s) => latest.get(s.instanceName.workloadName) === 'Removed'), 300_000);
        record({ name: `${label}: delete all → ${n} workloads Removed at the server`, value: performance.now() - t2, unit: 'ms' });
      }
    } finally {
      child.kill('SIGKILL');
      server.stop();
    }
  }
  const rss = (n: number) => byN.get(n)!.rss;
  for (const [from, to] of [
    [50, 500],
    [500, 1000],
    [50, 1000],
  ]) {
    const target = floorRss ? '≤0.05' : undefined;
    record({ name: `${label}: RSS per idle workload, ${from} → ${to}`, value: (rss(to) - rss(from)) / (to - from), unit: 'MiB', target });
  }
  return byN;
}

/** The latest reported state of each workload, read as the messages come (`reportedStates` reads them all each time). */
function latestStates(stream: AgentStream): Map<string, string> {
  const latest = new Map<string, string>();
  let read = 0;
  stream.events.on('message', () => {
    for (const [workload, , state] of reportedStates({ received: stream.received.slice(read) } as AgentStream)) latest.set(workload, state);
    read = stream.received.length;
  });
  return latest;
}

const machine = {
  cpus: os.cpus().length,
  model: os.cpus()[0]?.model,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  podman: execFileSync('podman', ['--version'], { encoding: 'utf8' }).trim(),
  date: new Date().toISOString(),
};
console.log(`ank-agent-rx benchmarks on ${machine.cpus} × ${machine.model}, ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.podman}`);
const only = process.argv
  .find((a) => a.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',');
const wanted = (section: string) => !only || only.includes(section);
if (wanted('scheduling')) benchScheduling();
if (['economy', 'latency', 'overhead', 'flood', 'released', 'logcost', 'health', 'framing'].some(wanted)) requirePodman();
if (wanted('economy')) await benchEconomy(quick ? 5 : 20);
if (wanted('latency')) await benchLatency();
if (wanted('overhead')) await benchOverhead(quick ? 10 : 60);
if (wanted('ci')) await benchControlInterface(quick ? 200 : 1000);
if (wanted('framing')) await benchFraming();
if (wanted('startup')) await benchStartup();
if (wanted('flood')) await benchLogFlood(quick ? 20 : 60);
if (wanted('released') && process.env.ANKAIOS_BIN) await benchReleased(quick ? 10 : 60);
if (wanted('scaling')) await benchScaling(quick ? 10 : 60);
if (wanted('logs')) await benchLogRequests();
if (wanted('logcost')) await benchLogCost();
if (wanted('metrics')) await benchMetrics(quick ? 10 : 30);
if (wanted('health')) await benchHealth(quick ? 60 : 300);
if (wanted('tracing')) await benchTracing(quick ? 200 : 500, quick ? 3 : 5);
// Only when asked for: it takes an hour (--quick: 10 minutes; --soak-minutes=N).
const soakMinutes = Number(process.argv.find((a) => a.startsWith('--soak-minutes='))?.slice('--soak-minutes='.length) ?? (quick ? 10 : 60));
if (only?.includes('soak')) await benchSoak(soakMinutes);
if (wanted('heap')) await benchHeap(300, quick ? 600 : 1500);
if (wanted('containerd')) await benchContainerd(quick ? 10 : 20, quick ? 20 : 60);
if (wanted('e2e') && process.env.ANKAIOS_BIN) await benchEndToEnd(quick ? 4 : 12, 100);
if (wanted('pulls') && process.env.ANKAIOS_BIN) await benchPulls(quick ? 1 : 3);
writeFileSync(path.resolve('bench/results.json'), `${JSON.stringify({ machine, figures }, null, 2)}\n`);
console.log('\nWritten to bench/results.json');
process.exit(0);
