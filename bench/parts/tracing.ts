// Bench part: --debug: what tracing costs when off, and when on.
import { spawn } from 'node:child_process';
import { FakeAnkaiosServer, addedWorkload } from '../../scripts/harness/fake-server.js';
import { median, record } from '../report.js';
import { busybox, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { until, cpuTicks, fakePodmanWithLogs, latestStates } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

export async function benchTracing(n: number, rounds: number): Promise<void> {
  console.log(`\n14. --debug (the real agent process on the fake podman; a burst of ${n} creates, median of ${rounds})`);
  /** Agent CPU from a ServerHello with `n` workloads until all are Running(Ok) at the server. */
  const burst = async (args: readonly string[]) => {
    const run = specFolder('ank-bench-trace-');
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
