// Bench part: A fleet's states. A server fans every workload's state out to every agent: a fake server sends
// one agent the states of other agents' workloads (in messages of 1 and of 100, as a server does on an apply
// and on a start), then their removal; the agent's CPU per state (from each thread's /proc/<pid>/task/<tid>/schedstat, in ns, precise
// where tick counters are not), its RSS after the removal, and its CPU a minute while idle with no workload.
// Ours beside the released agent (ANKAIOS_BIN).
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { type AgentStream, FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { BIN } from '../../scripts/harness/agent.js';
import { record, sleep } from '../report.js';
import { processCpuMs, rssKiB, settled, writeIdleFloor } from '../measure.js';
import { encodeAgentHello, encodeAgentLoadStatus } from '../../lib/codec/hello.js';
import { frame } from '../../lib/drivers/grpc-call.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** A process's CPU so far, in ms, to the nanosecond. */
const cpuMs = processCpuMs;

/** States of `count` workloads of other agents from `from`, `per` to a message. */
function sendStates(stream: AgentStream, from: number, count: number, per: number, state: 'running' | 'removed'): void {
  for (let first = from; first < from + count; first += per) {
    const workloadStates = Array.from({ length: Math.min(per, from + count - first) }, (_, i) => ({
      instanceName: { workloadName: `w${first + i}`, agentName: `fleet_${(first + i) % 60}`, id: `${(first + i).toString(16).padStart(8, '0')}` },
      executionState: {
        additionalInfo: '',
        ExecutionStateEnum: state === 'running' ? { case: 'running' as const, value: 0 } : { case: 'removed' as const, value: 0 },
      },
    }));
    stream.send({ FromServerEnum: { case: 'updateWorkloadState', value: { workloadStates } } });
  }
}

async function fleetOf(label: string, start: (url: string) => ChildProcess, total: number, idleSeconds: number): Promise<void> {
  const server = await FakeAnkaiosServer.start();
  const agent = start(server.url);
  try {
    const stream = await server.nextStream(20_000);
    await stream.waitFor(() => true);
    stream.send({ FromServerEnum: { case: 'serverHello', value: {} } });
    await sleep(3000);
    await settled(agent.pid!);
    const rssBefore = rssKiB(agent.pid!);
    const half = total / 2;
    let cpu = cpuMs(agent.pid!);
    sendStates(stream, 0, half, 1, 'running');
    await settled(agent.pid!);
    const perOne = ((cpuMs(agent.pid!) - cpu) / half) * 1000;
    cpu = cpuMs(agent.pid!);
    sendStates(stream, half, half, 100, 'running');
    await settled(agent.pid!);
    const perHundred = ((cpuMs(agent.pid!) - cpu) / half) * 1000;
    sendStates(stream, 0, total, 100, 'removed');
    await settled(agent.pid!);
    await sleep(3000);
    const growth = (rssKiB(agent.pid!) - rssBefore) / 1024;
    // V8 gives the heap back some seconds after it was last busy (its memory reducer): then the agent is idle.
    await sleep(idleSeconds * 1000);
    const growthLater = (rssKiB(agent.pid!) - rssBefore) / 1024;
    cpu = cpuMs(agent.pid!);
    await sleep(idleSeconds * 1000);
    const idle = ((cpuMs(agent.pid!) - cpu) / idleSeconds) * 60;
    record({ name: `${label}: agent CPU per other agent's state, messages of 1`, value: perOne, unit: 'µs' });
    record({ name: `${label}: agent CPU per other agent's state, messages of 100`, value: perHundred, unit: 'µs' });
    record({ name: `${label}: RSS after ${total} states and their removal, 3 s after`, value: growth, unit: 'MiB' });
    record({
      name: `${label}: the same, ${idleSeconds + 3} s after`,
      value: growthLater,
      unit: 'MiB',
      target: label === 'ours' ? '≤8' : undefined,
    });
    record({ name: `${label}: CPU while idle with no workload`, value: idle, unit: 'ms/min', target: label === 'ours' ? '≤5' : undefined });
  } finally {
    agent.kill('SIGKILL');
    server.stop();
  }
}

/** The CPU a minute of the idle floor (measure.ts, writeIdleFloor): Node doing what the design asks of an idle agent, and nothing else. */
async function idleFloor(run: string, idleSeconds: number): Promise<void> {
  const server = await FakeAnkaiosServer.start();
  const hex = (message: Uint8Array) => frame(message).toString('hex');
  const floor = spawn(
    process.execPath,
    [writeIdleFloor(run), server.url, hex(encodeAgentHello('floor', '1.0.1', {})), hex(encodeAgentLoadStatus('floor', 3, 2 ** 33))],
    { stdio: 'ignore' },
  );
  try {
    await server.nextStream(20_000);
    await sleep(idleSeconds * 1000);
    const cpu = cpuMs(floor.pid!);
    await sleep(idleSeconds * 1000);
    record({
      name: 'floor (Node on HTTP/2, a load status every 2 s, a ping every 10 s): CPU while idle',
      value: ((cpuMs(floor.pid!) - cpu) / idleSeconds) * 60,
      unit: 'ms/min',
    });
  } finally {
    floor.kill('SIGKILL');
    server.stop();
  }
}

export async function benchFleet(quick: boolean): Promise<void> {
  const total = quick ? 20_000 : 100_000;
  const idleSeconds = quick ? 20 : 60;
  const released = process.env.ANKAIOS_BIN && path.join(process.env.ANKAIOS_BIN, 'ank-agent');
  console.log(
    `\nA fleet's states (${total} states of other agents' workloads, half in messages of 1, half of 100, then removed; then ${idleSeconds} s to settle and ${idleSeconds} s idle)`,
  );
  const run = specFolder('ank-bench-fleet-');
  const args = (url: string) => ['-n', 'fleet_agent', '-s', url, '-k', '-r', run];
  await fleetOf('ours', (url) => spawn(BIN, args(url), { stdio: 'ignore' }), total, idleSeconds);
  if (released) await fleetOf('released', (url) => spawn(released, args(url), { stdio: 'ignore' }), total, idleSeconds);
  await idleFloor(run, idleSeconds);
}
