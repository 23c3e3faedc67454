// Bench part: Start-up: --version beside `node -e 0`; process start → first message at the server beside a Node +
// gRPC client.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { median, record } from '../report.js';
import { BIN } from '../../scripts/harness/agent.js';
import { writeBaseline } from '../measure.js';

/** Start-up: `--version` beside `node -e 0`; process start → AgentHello beside a Node + gRPC client and the released agent. */
export async function benchStartup(): Promise<void> {
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
