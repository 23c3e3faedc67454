// The run as a value: run() gives how it ended and a dispose that lets go of all it holds. Standalone, in this
// process, on real Podman: after the dispose no handle, child process (its own Podman service too), socket or signal
// handler of the run is left, and its workload runs on (an agent that ends leaves its workloads running).
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { readCommandLine } from '../../bin/command-line.js';
import { run } from '../../bin/run.js';
import { cleanup, podman, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { specFolder } from '../../scripts/harness/temp.js';
import { until } from '../../scripts/harness/wait.js';
import { children, handles, more, sockets } from '../../scripts/harness/leftovers.js';

const signalHandlers = () => process.listenerCount('SIGINT') + process.listenerCount('SIGTERM');

describe('run() and its dispose (standalone, real Podman)', function () {
  this.timeout(120_000);
  before(requirePodman);
  const agentName = uniqueAgent('run');
  after(() => cleanup(agentName));

  it('after the dispose no handle, process, socket or signal handler of the run is left; its workload runs on', async () => {
    const folder = specFolder('ank-run-');
    const manifest = path.join(folder, 'manifest.yaml');
    writeFileSync(
      manifest,
      `apiVersion: v1\nworkloads:\n  sleeper:\n    runtime: podman\n    agent: ${agentName}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: ["sleep", "600"]\n`,
    );
    const config = path.join(folder, 'agent.toml');
    writeFileSync(config, "version = 'v1'\nruntimes = ['podman']\n");
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = { handles: handles(), children: children(), sockets: sockets(), signals: signalHandlers() };
    const stdout = process.stdout.write;
    // The status view writes to stdout: kept out of the spec's report.
    process.stdout.write = (() => true) as typeof process.stdout.write;
    let running: Awaited<ReturnType<typeof run>>;
    try {
      running = await run(readCommandLine(['-m', manifest, '-r', folder, '-x', config]));
      const container = 'sleeper.';
      await until(() => podman('ps', '--filter', `label=agent=${agentName}`, '--format', '{{.Names}}').includes(container), 'the workload running', 60_000);
      expect(signalHandlers(), 'the run handles signals').to.be.greaterThan(before.signals);
      // Where the system runs no Podman service, the run starts one of its own in its folder: it is the run's to stop.
      const system = existsSync('/run/podman/podman.sock');
      if (!system) await until(() => existsSync(path.join(folder, `${agentName}_io`, 'podman.sock')), "the run's own Podman service", 10_000);
      running.dispose();
      expect(await running.done, 'how the run ended').to.deep.equal({ code: 0 });
    } finally {
      process.stdout.write = stdout;
    }
    const gone = () => Object.keys(more(before.handles, handles())).length === 0 && children().every((pid) => before.children.includes(pid));
    await until(gone, 'the handles and processes of the run gone', 5000).catch(() => undefined);
    expect(more(before.handles, handles()), 'handles left by the run').to.deep.equal({});
    expect(
      children().filter((pid) => !before.children.includes(pid)),
      'processes left by the run',
    ).to.deep.equal([]);
    expect(
      sockets().filter((s) => !before.sockets.includes(s)),
      'sockets left by the run',
    ).to.deep.equal([]);
    expect(signalHandlers(), 'signal handlers left by the run').to.equal(before.signals);
    expect(podman('ps', '--filter', `label=agent=${agentName}`, '--filter', 'status=running', '--format', '{{.Names}}'), 'its workload, running').to.match(
      /^sleeper\./,
    );
  });
});
