// What the bench parts measure processes with: their RSS, CPU and descriptors, the agent's idle figures,
// a fake podman with logs, a Node + gRPC client as the floor, and the states a fake server heard.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type AgentStream, FakeAnkaiosServer, addedWorkload, reportedStates } from '../scripts/harness/fake-server.js';
import { cpuMs, median, sleep } from './report.js';
import { busybox, cleanup, uniqueAgent } from '../scripts/harness/podman.js';
import { BIN } from '../scripts/harness/agent.js';
import { specFolder } from '../scripts/harness/temp.js';

/** Waits (polling every 20 ms) until `condition` holds; fails after `timeoutMs`. */
export async function until(condition: () => boolean, timeoutMs = 120_000): Promise<void> {
  for (let waited = 0; !condition(); waited += 20) {
    if (waited > timeoutMs) throw new Error('timed out');
    await sleep(20);
  }
}

/** When Podman says a container finished (ms, wall clock). */
export const finishedAt = (name: string) =>
  Number(execFileSync('podman', ['inspect', '--format', '{{.State.FinishedAt.UnixMilli}}', name], { encoding: 'utf8' }).trim());

/** A process's resident memory (KiB). */
export const rssKiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

/** A process's own CPU time in clock ticks (1/100 s). */
export const cpuTicks = (pid: number) => cpuMs(pid).own / 10;

/** The CPU time of a process's waited-for children, in s. */
export const childCpu = (pid: number) => cpuMs(pid).children / 1000;

/** The median RSS (MiB) and the CPU (% of a core) of a process over `seconds` of idle. */
export async function idleFigures(pid: number, seconds: number): Promise<{ rss: number; cpu: number }> {
  const ticks = cpuTicks(pid);
  const rss: number[] = [];
  for (let s = 0; s < seconds; s++) {
    await sleep(1000);
    rss.push(rssKiB(pid));
  }
  return { rss: median(rss) / 1024, cpu: ((cpuTicks(pid) - ticks) / 100 / seconds) * 100 };
}

/** The floor: Node with the gRPC client only, saying one message on a ConnectAgent stream and idling. */
export function writeBaseline(run: string): string {
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

/**
 * The idle floor of a Node process that does what the design asks of an idle agent, and nothing else: on
 * Node's HTTP/2, a ConnectAgent stream with its hello, every 2 s /proc/stat and /proc/meminfo read and an
 * AgentLoadStatus written (swdd~agent-sends-node-resource-availability-to-server~1), a keepalive ping every 10 s.
 * Run as `node <file> <server url> <hello hex> <load status hex>`, each message framed as gRPC frames it.
 */
export function writeIdleFloor(run: string): string {
  const floor = `import http2 from 'node:http2';
import { readFileSync } from 'node:fs';
const [url, hello, load] = process.argv.slice(2).map((a, i) => (i === 0 ? a : Buffer.from(a, 'hex')));
const session = http2.connect(url);
const stream = session.request({ ':method': 'POST', ':path': '/grpc_api.AgentConnection/ConnectAgent', 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
stream.on('data', () => undefined);
stream.write(hello);
setInterval(() => {
  readFileSync('/proc/stat');
  readFileSync('/proc/meminfo');
  stream.write(load);
}, 2000);
setInterval(() => session.ping(() => undefined), 10000);`;
  const file = path.join(run, 'idle-floor.mjs');
  writeFileSync(file, floor);
  return file;
}

export const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/** The children of `pid` that are zombies (exited, not yet reaped). */
export const zombies = (pid: number) =>
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

/** Starts an agent process against `url` as `name` in `run`; `env` holds the PATH with the podman wrapper. */
export type AgentStart = (url: string, name: string, run: string, env: NodeJS.ProcessEnv) => ChildProcess;

/** A `podman` on PATH that logs every call and runs the real one: counts the calls of any agent. */
export function podmanWrapper(folder: string): { env: NodeJS.ProcessEnv; calls: () => number } {
  const log = path.join(folder, 'podman-calls.log');
  const real = execFileSync('sh', ['-c', 'command -v podman'], { encoding: 'utf8' }).trim();
  writeFileSync(log, '');
  writeFileSync(path.join(folder, 'podman'), `#!/bin/sh\necho "$1" >> '${log}'\nexec '${real}' "$@"\n`, { mode: 0o755 });
  return { env: { ...process.env, PATH: `${folder}:${process.env.PATH ?? ''}` }, calls: () => readFileSync(log, 'utf8').split('\n').filter(Boolean).length };
}

/**
 * The fake podman of the scaling bench, with a `podman logs` that prints one line and waits while the agent
 * lives (a shell and a `tail`, so hundreds of streams cost little, and none outlives an agent killed with
 * SIGKILL): the agent's own cost is what is measured.
 */
export function fakePodmanWithLogs(logsWait = true): NodeJS.ProcessEnv {
  const fake = specFolder('ank-fake-podman-');
  const state = path.join(fake, 'containers');
  execFileSync('mkdir', [state]);
  writeFileSync(
    path.join(fake, 'podman'),
    `#!/bin/sh\nif [ "$1" = logs ]; then echo "a line of $*"; ${logsWait ? 'exec tail -f /dev/null --pid=$PPID' : 'exit 0'}; fi\nexec ${process.execPath} ${path.resolve('bench/fake-podman.mjs')} "$@"\n`,
    { mode: 0o755 },
  );
  return { ...process.env, PATH: `${fake}:${process.env.PATH ?? ''}`, FAKE_PODMAN_DIR: state };
}

/**
 * An agent config (`-x`) without the Podman service, for ours on the fake podman: the fake cannot be one
 * (`podman system service` ends at once), so the agent would start it again and again (1, 2, 4 s …), each a fork
 * of the agent, charged to whatever it was doing meanwhile. The released agent has no service: both then run a
 * podman process per call.
 */
export function withoutPodmanService(): string {
  const file = path.join(specFolder('ank-bench-config-'), 'agent.toml');
  writeFileSync(file, "version = 'v1'\npodman_service = false\n");
  return file;
}

/** How long after the last workload runs (or the agent started) the idle figures begin: the burst's garbage is collected by then. */
export const SETTLE_MS = 15_000;

/**
 * The agent as shipped (`args` after its name, server and run folder), against a fake server of its own, in a
 * run folder of its own; `end()` kills it, stops the server and removes its containers.
 */
export async function shippedAgent(prefix: string, args: readonly string[] = [], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) {
  const run = specFolder(`ank-bench-${prefix}-`);
  const agentName = uniqueAgent(prefix);
  const server = await FakeAnkaiosServer.start();
  const child = spawn(BIN, ['-n', agentName, '-s', server.url, '-k', '-r', run, ...args], { stdio: 'ignore', ...options });
  const end = () => {
    child.kill('SIGKILL');
    server.stop();
    cleanup(agentName);
  };
  return { run, agentName, server, child, end };
}

/** The agent as shipped on the fake podman of fakePodmanWithLogs, with `n` workloads running and settled. */
export async function settledAgent(prefix: string, n: number, args: readonly string[] = []) {
  const { agentName, server, child, end: stop } = await shippedAgent(prefix, args, { env: fakePodmanWithLogs() });
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

/** The latest reported state of each workload, read as the messages come (`reportedStates` reads them all each time). */
export function latestStates(stream: AgentStream): Map<string, string> {
  const latest = new Map<string, string>();
  let read = 0;
  stream.events.on('message', () => {
    for (const [workload, , state] of reportedStates({ received: stream.received.slice(read) } as AgentStream)) latest.set(workload, state);
    read = stream.received.length;
  });
  return latest;
}

/**
 * A process's CPU so far, in ms, to the nanosecond: every thread's (from /proc/<pid>/task/<tid>/schedstat). The
 * released agent does its work on tokio's worker threads, Node its garbage collection and compiling on
 * threads of its own: the main thread's alone would leave those out.
 */
/** Resolves once the process has used less than 1 ms of CPU in 300 ms (it has taken what was sent), or after `withinMs`. */
export async function settled(pid: number, withinMs = 30_000): Promise<void> {
  // A process that never rests (the released agent polling workloads it left unreported) is taken as it is after `withinMs`.
  for (let before = processCpuMs(pid), waited = 0; waited < withinMs; waited += 300) {
    await sleep(300);
    const now = processCpuMs(pid);
    if (now - before < 1) return;
    before = now;
  }
}

/**
 * KiB of a process's anonymous memory (its heap, its stacks, V8's pages) that it reads or writes in 2.5 s, from
 * the pages' referenced bits, cleared first: the median of `windows` such spans (one at a time they move with the
 * collector's work). Root only: undefined otherwise. The footprint of a wake: on a guest whose memory is slow to
 * touch again after idle, a wake's CPU follows it.
 */
export async function anonymousTouchedKiB(pid: number, windows = 3): Promise<number | undefined> {
  const spans: number[] = [];
  for (let i = 0; i < windows; i++) {
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, '1');
    } catch {
      return undefined;
    }
    await sleep(2500);
    let kib = 0;
    let anonymous = false;
    for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
      const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
      if (mapping) anonymous = mapping[1] === '' || mapping[1].startsWith('[');
      else if (anonymous && line.startsWith('Referenced:')) kib += Number(line.split(/\s+/)[1]);
    }
    spans.push(kib);
  }
  return median(spans);
}

/** The CPU of a process's main thread in ms (its JavaScript, for Node): the rest of processCpuMs is its helper threads'. */
export function mainThreadCpuMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return 0;
  }
}

export function processCpuMs(pid: number): number {
  let ns = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return ns / 1e6;
}
