// Another user fills the temporary folder (a tmpfs with no root reserve, as /tmp is by default on Debian 13):
// running workloads stay Running, and the agent never crashes on it. Real Podman, real tmpfs mounts.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { asyncScheduler } from 'rxjs';
import { expect } from 'chai';
import { Processes } from '../../lib/drivers/processes.js';
import { Cli } from '../../lib/runtimes/base/cli.js';
import { BIN } from '../../scripts/harness/agent.js';
import { IMAGE, PodmanAgent, busybox, cleanup, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';
import { Tmpfs, asNobody } from '../../scripts/harness/tmpfs.js';
import { specFolder } from '../../scripts/harness/temp.js';

describe('a full temporary folder (real Podman, a tmpfs filled by an unprivileged user)', function () {
  this.timeout(90_000);
  before(function () {
    requirePodman();
    if (process.getuid?.() !== 0) this.skip();
  });
  const fs = new Tmpfs();
  const tmpfs = (options: string) => fs.mount(options);
  afterEach(() => fs.unmountAll());

  // swdd~podman-state-getter-returns-lost-state~1, swdd~podman-state-getter-maps-state~3
  it('running workloads stay Running when the place of the calls\' output fills up: a list that could not be kept is no "no containers"', async () => {
    const dir = tmpfs('size=64k');
    const processes = new Processes({ parent: dir });
    const agent = new PodmanAgent(uniqueAgent('full'), undefined, new Cli({ binary: 'podman', processes, clock: asyncScheduler }), {
      events: false,
      verifyMs: 500,
    });
    try {
      const names = ['one', 'two', 'three'];
      agent.send({ kind: 'serverHello', added: names.map((n) => busybox(n, agent.agentName)) });
      for (const n of names) await agent.waitFor(n, /^Running\(Ok\)$/);
      asNobody(`dd if=/dev/zero of=${dir}/fill bs=4k`);
      // The states are polled every 500 ms (no events): a dozen polls fail meanwhile. Podman could not be
      // asked: Unknown once, as the released agent says it (never Lost: no list is no "no containers").
      await new Promise((resolve) => setTimeout(resolve, 6000));
      rmSync(path.join(dir, 'fill'));
      for (const n of names) await agent.waitFor(n, /^Running\(Ok\)$/);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      for (const n of names) {
        const [starting, running, unknown, ...rest] = agent.history(n);
        expect([starting, running, ...rest]).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)', 'Running(Ok)']);
        expect(unknown).to.match(
          /^Failed\(Unknown\): Podman could not be asked for the container states: podman ps exited with 0, but its output could not be kept whole in .* \(is its file system full\?\)\.$/,
        );
      }
    } finally {
      agent.stop();
      processes.dispose();
    }
  });

  for (const [what, options, fill, reason] of [
    ['full', 'size=64k', 'dd if=/dev/zero of=fill bs=4k', /The temporary folder '\/.*' has no room left \(TMPDIR\)/],
    ['with no inode left', 'nr_inodes=8', 'i=0; while touch f$i; do i=$((i+1)); done', /The temporary folder '\/.*' has no inode left \(TMPDIR\)/],
    ['read-only', 'ro,size=64k', 'true', /read-only file system/],
  ] as const) {
    it(`the agent as shipped does not crash with TMPDIR ${what}: its workload says why, and it runs once TMPDIR is usable`, async () => {
      const dir = tmpfs(options);
      asNobody(`cd ${dir} && ${fill}`);
      const agentName = uniqueAgent('tmpdir');
      const run = specFolder('ank-full-run-');
      const manifest = path.join(run, 'manifest.yaml');
      writeFileSync(
        manifest,
        `apiVersion: v1\nworkloads:\n  sleeper:\n    runtime: podman\n    agent: ${agentName}\n    runtimeConfig: |\n      image: ${IMAGE}\n      commandOptions: ["--stop-timeout", "1"]\n      commandArgs: ["/bin/sleep", "3600"]\n`,
      );
      const child: ChildProcess = spawn(process.execPath, [BIN, '--manifest', manifest, '-n', agentName, '-r', run], {
        env: { ...process.env, TMPDIR: dir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let log = '';
      child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
      try {
        // Podman itself keeps files in TMPDIR: its create fails, said so, and is retried.
        await until(() => new RegExp(`sleeper.*Retry 2: .*${reason.source}`).test(log), 'the create to fail twice', 30_000);
        expect(child.exitCode, log).to.equal(null);
        expect(log).not.to.match(/\n\s+at /);
        // Lazily: the agent's Podman service keeps files open in it.
        spawnSync('umount', ['-l', dir]);
        await until(() => /sleeper.*Running\(Ok\)/.test(log), 'the workload to run', 40_000);
      } finally {
        child.kill('SIGINT');
        await new Promise((resolve) => child.once('close', resolve));
        // The agent leaves its Podman service for the next agent; none comes here.
        spawnSync('pkill', ['-f', `unix://${run}/`]);
        cleanup(agentName);
        rmSync(run, { recursive: true, force: true });
      }
    });
  }
});
