// Bench part: Start-up: `--version` beside `node -e 0`; exec → AgentHello at a gRPC server on loopback and exec →
// the first log line, ours beside `node -e 0`, a plain Node + gRPC client and the released agent (with
// ANKAIOS_BIN), alternating.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { median, p90, record } from '../report.js';
import { BIN } from '../../scripts/harness/agent.js';
import { processCpuMs, settled, writeBaseline } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

const RUNS = 20;

/** Start-up: `--version` beside `node -e 0`; exec → AgentHello and exec → first log line, medians and p90 of RUNS alternating runs. */
export async function benchStartup(quick = false): Promise<void> {
  const runs = quick ? 6 : RUNS;
  console.log(`\nStart-up (${runs} runs each, alternating; medians and p90)`);
  const timed = (command: string, args: string[]) => {
    const t = performance.now();
    execFileSync(command, args, { stdio: 'ignore' });
    return performance.now() - t;
  };
  /** Started as the agent is below (this process busy with a gRPC server), to its exit: the same clock for both. */
  const spawned = (command: string, args: string[]) =>
    new Promise<number>((resolve) => {
      const t = performance.now();
      spawn(command, args, { stdio: 'ignore' }).once('exit', () => resolve(performance.now() - t));
    });
  const node: number[] = [];
  const nodeSync: number[] = [];
  const version: number[] = [];
  const idle = await FakeAnkaiosServer.start();
  for (let i = 0; i < runs; i++) {
    node.push(await spawned(process.execPath, ['-e', '0']));
    nodeSync.push(timed(process.execPath, ['-e', '0']));
    version.push(timed(BIN, ['--version']));
  }
  idle.stop();
  const nodeMs = median(node);
  record({ name: 'node -e 0, started as the agents below', value: nodeMs, unit: 'ms', note: `p90 ${p90(node).toFixed(1)}` });
  record({ name: 'node -e 0, run to its end alone', value: median(nodeSync), unit: 'ms', note: `p90 ${p90(nodeSync).toFixed(1)}` });
  record({ name: 'ank-agent --version', value: median(version), unit: 'ms', target: `≤${(1.3 * median(nodeSync)).toFixed(0)} (1.3 × node -e 0 alone)` });
  const run = specFolder('ank-bench-start-');
  const floorFile = writeBaseline(run);
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  const agentArgs = (url: string, name: string) => ['-n', name, '-s', url, '-k', '-r', run];
  type Start = [label: string, start: (url: string, port: number, name: string) => ChildProcess, logs: boolean];
  const starts: Start[] = [
    ['ours', (url, _port, name) => spawn(BIN, agentArgs(url, name), { stdio: ['ignore', 'pipe', 'pipe'] }), true],
    ['Node + gRPC client', (_url, port) => spawn(process.execPath, [floorFile, `127.0.0.1:${port}`], { stdio: 'ignore' }), false],
  ];
  if (released) starts.push(['released', (url, _port, name) => spawn(released, agentArgs(url, name), { stdio: ['ignore', 'pipe', 'pipe'] }), true]);
  const hello = new Map<string, number[]>(starts.map(([label]) => [label, []]));
  const firstLine = new Map<string, number[]>(starts.map(([label]) => [label, []]));
  const upCpu = new Map<string, number[]>(starts.map(([label]) => [label, []]));
  for (let i = 0; i < runs; i++) {
    for (const [label, start, logs] of starts) {
      // The server greets, so that the agent goes on as under a real one: its existing workloads listed, its load told.
      const server = await FakeAnkaiosServer.start({ greet: true });
      const t = performance.now();
      const child = start(server.url, server.port, `start_${i}`);
      const line = logs
        ? new Promise<number>((resolve) => {
            const seen = () => resolve(performance.now() - t);
            child.stdout?.once('data', seen);
            child.stderr?.once('data', seen);
          })
        : undefined;
      await (await server.nextStream()).waitFor(() => true);
      hello.get(label)!.push(performance.now() - t);
      if (line) firstLine.get(label)!.push(await line);
      if (logs) {
        await settled(child.pid!);
        upCpu.get(label)!.push(processCpuMs(child.pid!));
      }
      child.kill('SIGKILL');
      server.stop();
    }
  }
  // Standalone: exec → the first workload command (a `podman run`, told by a podman on PATH that notes the time).
  const fake = specFolder('ank-bench-manifest-');
  const manifest = path.join(fake, 'manifest.yaml');
  writeFileSync(manifest, 'apiVersion: v1\nworkloads:\n  one:\n    runtime: podman\n    agent: start_m\n    runtimeConfig: |\n      image: x\n');
  writeFileSync(path.join(fake, 'podman'), `#!/bin/sh\ncase "$1" in run) : > '${fake}/ran'; exit 1;; ps|volume) echo '[]';; esac\n`, { mode: 0o755 });
  const firstRun: number[] = [];
  for (let i = 0; i < runs; i++) {
    rmSync(path.join(fake, 'ran'), { force: true });
    const t = performance.now();
    const child = spawn(BIN, ['--manifest', manifest, '-r', run], { stdio: 'ignore', env: { ...process.env, PATH: `${fake}:${process.env.PATH ?? ''}` } });
    while (!existsSync(path.join(fake, 'ran'))) await new Promise((resolve) => setTimeout(resolve, 1));
    firstRun.push(performance.now() - t);
    child.kill('SIGKILL');
  }
  record({
    name: 'ours, --manifest: exec → its first workload command (podman run)',
    value: median(firstRun),
    unit: 'ms',
    note: `p90 ${p90(firstRun).toFixed(1)}`,
  });
  const client = median(hello.get('Node + gRPC client')!);
  for (const [label, , logs] of starts) {
    const ours = label === 'ours';
    const times = hello.get(label)!;
    record({
      name: `${label}: exec → AgentHello at the server`,
      value: median(times),
      unit: 'ms',
      note: `p90 ${p90(times).toFixed(1)}`,
      target: ours ? `≤${Math.min(1.3 * nodeMs, 0.7 * client).toFixed(0)} (1.3 × node -e 0, 0.7 × Node + gRPC client)` : undefined,
    });
    if (!logs) continue;
    record({
      name: `${label}: CPU from exec until connected and settled`,
      value: median(upCpu.get(label)!),
      unit: 'ms',
      note: `p90 ${p90(upCpu.get(label)!).toFixed(1)}`,
      target: ours ? `≤${(median(nodeSync) + 100).toFixed(0)} (node -e 0 alone + 100 ms)` : undefined,
    });
    const lines = firstLine.get(label)!;
    record({
      name: `${label}: exec → first log line`,
      value: median(lines),
      unit: 'ms',
      note: `p90 ${p90(lines).toFixed(1)}`,
      target: ours ? `≤${(1.2 * nodeMs).toFixed(0)} (1.2 × node -e 0)` : undefined,
    });
  }
}
