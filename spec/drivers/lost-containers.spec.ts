// The sweep of what a cut Podman call left outside Podman's list (lib/runtimes/podman/lost-creates.ts), attacked as a
// local user and another storage would attack it, on real Podman: /proc is world-readable, and so is the name of the
// agent's own `podman run`.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ownArgv, ownProcessesOf } from '../../lib/drivers/machine.js';
import { instanceKey } from '../../lib/workload.js';
import { IMAGE, PodmanAgent, podman, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';
import { specFolder } from '../../scripts/harness/temp.js';

const NOBODY = 65534;

describe('the sweep of lost containers trusts nothing a user can forge (real Podman)', function () {
  this.timeout(90_000);
  before(requirePodman);
  const children: ChildProcess[] = [];
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
    for (const clean of cleanups.splice(0).reverse()) clean();
  });

  /** A folder every user may read, as an unprivileged user's home would be. */
  const openFolder = () => {
    const folder = specFolder('ank-lost-');
    chmodSync(folder, 0o755);
    return folder;
  };

  /** Starts `argv` (with `argv0` as its name) as user `uid`; resolves once it runs as that program, past the shell's exec. */
  const started = async (uid: number, argv0: string, argv: readonly string[]) => {
    const child = spawn('bash', ['-c', 'exec -a "$0" "$@"', argv0, ...argv], { uid, gid: uid, stdio: 'ignore' });
    children.push(child);
    const name = () => {
      try {
        return readFileSync(`/proc/${child.pid}/cmdline`, 'latin1').split('\0')[0];
      } catch {
        return undefined;
      }
    };
    await until(() => name() === argv0, 'the process runs');
    return child;
  };

  // rx~lost-container-sweep~1
  it("finds processes of the agent's own user running the executable asked for, never another user's", async () => {
    const root = await started(0, 'sleep', ['/bin/sleep', '60']);
    const user = await started(NOBODY, 'sleep', ['/bin/sleep', '60']);
    const pids = [...ownProcessesOf('/bin/sleep')].map((p) => p.pid);
    expect(pids).to.include(root.pid);
    expect(pids).not.to.include(user.pid);
    // A user's program named as the executable (its argv[0]) is not it (`; exit` keeps bash from exec-ing sleep).
    const named = await started(0, '/bin/sleep', ['/bin/bash', '-c', 'sleep 60; exit']);
    expect([...ownProcessesOf('/bin/sleep')].map((p) => p.pid)).not.to.include(named.pid);
    // Nor is another user's process an argv the agent acts on (the pid of a service it would kill).
    expect(ownArgv(root.pid!)).to.deep.equal(['sleep', '60', '']);
    expect(ownArgv(user.pid!)).to.equal(undefined);
  });

  // rx~lost-container-sweep~1, swdd~podman-create-workload-deletes-failed-container~1
  it("a user's fake conmon with a hostile runtime and a root container of another storage named as the instance: a failed create and a delete run nothing and touch nothing", async () => {
    const agent = new PodmanAgent(uniqueAgent('lost'));
    cleanups.push(() => agent.stop());
    const w = spec('victim', agent.agentName, 'podman', `image: localhost/not-here:never\ncommandOptions: ["--pull=never"]\ncommandArgs: ["/bin/true"]\n`);
    const key = instanceKey(w.instanceName);

    // Another Podman storage of root's, with a container that carries the instance's name.
    const other = specFolder('ank-other-storage-');
    const otherPodman = (...args: string[]) =>
      execFileSync(
        'podman',
        ['--root', path.join(other, 'root'), '--runroot', path.join(other, 'run'), '--tmpdir', path.join(other, 'tmp'), '--storage-driver', 'vfs', ...args],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
      ).trim();
    const image = path.join(other, 'busybox.tar');
    podman('save', '--quiet', '-o', image, IMAGE);
    otherPodman('load', '--quiet', '-i', image);
    const otherId = otherPodman('run', '-d', '--network', 'none', '--name', key, IMAGE, '/bin/sleep', '3600');
    cleanups.push(() => otherPodman('rm', '--force', '--time', '0', '--all'));

    // A user's program that runs a hostile "runtime" as whoever calls it, and a fake conmon that names it.
    const home = openFolder();
    const marker = path.join(home, 'ran');
    const evil = path.join(home, 'evil.sh');
    writeFileSync(evil, `#!/bin/sh\necho "$(id -u) $*" >> ${marker}\n`, { mode: 0o755 });
    const hold = path.join(home, 'hold.sh');
    writeFileSync(hold, 'while :; do sleep 1; done\n', { mode: 0o755 });
    const fake = await started(NOBODY, '/usr/bin/conmon', ['bash', hold, '-n', key, '-c', otherId, '-u', otherId, '-r', evil]);
    const fakeWithRunc = await started(NOBODY, '/usr/bin/conmon', ['bash', hold, '-n', key, '-c', otherId, '-r', '/usr/bin/runc']);

    agent.send({ kind: 'serverHello', added: [w] });
    await until(() => agent.history('victim').filter((h) => /^Pending\(Starting\): Retry \d+:/.test(h)).length >= 2, 'two failed creates', 30_000);
    agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: w.instanceName, dependencies: {} }] });
    await agent.waitFor('victim', /^Removed$/, 30_000);

    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran', "the user's program").to.equal('nothing ran');
    expect(otherPodman('inspect', '--format', '{{.State.Status}}', otherId), "the other storage's container").to.equal('running');
    expect(
      [fake, fakeWithRunc].every((c) => c.exitCode === null && c.signalCode === null),
      "the user's processes",
    ).to.equal(true);
  });
});
