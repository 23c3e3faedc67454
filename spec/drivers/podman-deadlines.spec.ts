// Every Podman call has a deadline and only a few run at once. A `podman` wrapper first on
// PATH hangs the calls the spec chooses, and otherwise runs the real podman.
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { firstValueFrom, forkJoin } from 'rxjs';
import { until } from '../../scripts/harness/wait.js';
import { PodmanAgent, busybox, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { harnessCli } from '../../scripts/harness/processes.js';
import { specFolder } from '../../scripts/harness/temp.js';

describe('Podman calls under faults (a podman wrapper on PATH)', function () {
  this.timeout(60_000);
  before(requirePodman);
  const dir = specFolder('ank-podman-wrapper-');
  const wrapper = path.join(dir, 'podman');
  const hang = (verb: string) => path.join(dir, `hang-${verb}`);
  const real = execPath('podman');
  writeFileSync(
    wrapper,
    `#!/bin/sh
# Hangs "podman <verb>" while ${dir}/hang-<verb> exists; counts the calls running at once.
mkdir -p ${dir}/running && touch ${dir}/running/$$ && ls ${dir}/running | wc -l >> ${dir}/concurrency
trap 'rm -f ${dir}/running/$$' EXIT
[ -e "${dir}/hang-$1" ] && exec sleep 3600
[ -e "${dir}/slow" ] && sleep 0.2
${real} "$@"
`,
  );
  chmodSync(wrapper, 0o755);
  let agent: PodmanAgent | undefined;
  afterEach(() => {
    for (const verb of ['ps', 'run']) rmSync(hang(verb), { force: true });
    agent?.stop();
  });

  it('a hung `podman ps` is killed at its deadline and reported as Failed(Unknown) with the reason; the cache keeps polling and the state comes back', async () => {
    agent = new PodmanAgent(uniqueAgent('deadline'), undefined, harnessCli(wrapper, { deadlines: { query: 500, command: 5000 } }));
    const w = busybox('watched', agent.agentName);
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('watched', /^Running\(Ok\)$/);
    writeFileSync(hang('ps'), '');
    await agent.waitFor(
      'watched',
      /^Failed\(Unknown\): Podman could not be asked for the container states: podman ps did not finish within 0.5 s and was killed\.$/,
    );
    rmSync(hang('ps'));
    const seen = agent.history('watched').length;
    for (let waited = 0; !agent.history('watched').slice(seen).includes('Running(Ok)'); waited += 100) {
      if (waited > 10_000) throw new Error(`the state did not come back: ${agent.history('watched').join(' → ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(agent.history('watched').at(-1)).to.equal('Running(Ok)');
  });

  // A create may pull its image for as long as a pull may take, but not go its command deadline without progress.
  it('a hung `podman run` is killed once it has gone its deadline without progress: the create fails and is retried, and the retry runs the workload', async () => {
    agent = new PodmanAgent(uniqueAgent('deadline'), undefined, harnessCli(wrapper, { deadlines: { query: 5000, command: 1000 } }));
    writeFileSync(hang('run'), '');
    const w = busybox('stuck', agent.agentName);
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('stuck', /^Pending\(Starting\): Retry 1: podman run made no progress for 1 s and was killed\.$/);
    rmSync(hang('run'));
    await agent.waitFor('stuck', /^Running\(Ok\)$/);
  });

  it('at most a bounded number of podman calls run at once: the others wait in line', async () => {
    const cli = harnessCli(wrapper, { maxProcesses: 3 });
    writeFileSync(path.join(dir, 'slow'), '');
    rmSync(path.join(dir, 'concurrency'), { force: true });
    rmSync(path.join(dir, 'running'), { force: true, recursive: true });
    try {
      await firstValueFrom(forkJoin(Array.from({ length: 12 }, () => cli.run(['version', '--format', '{{.Client.Version}}']))));
    } finally {
      rmSync(path.join(dir, 'slow'));
    }
    const counts = readFileSync(path.join(dir, 'concurrency'), 'utf8').trim().split('\n').map(Number);
    expect(counts).to.have.length(12);
    expect(Math.max(...counts)).to.be.at.most(3);
    expect(existsSync(path.join(dir, 'running'))).to.equal(true);
  });

  it('at most a bounded number of output streams (podman logs) run at once: the next starts when one ends', async () => {
    const cli = harnessCli(wrapper, { maxStreams: 2 });
    writeFileSync(hang('logs'), '');
    const lines: string[] = [];
    const subs = Array.from({ length: 3 }, () => cli.lines(['logs', 'x']).subscribe((line) => lines.push(line)));
    try {
      await until(() => cli.calls === 2, 'two streams start');
      await new Promise((r) => setTimeout(r, 300));
      expect(cli.calls, 'the third waits').to.equal(2);
      subs[0].unsubscribe();
      await until(() => cli.calls === 3, 'the third starts when the first ends');
    } finally {
      subs.forEach((s) => s.unsubscribe());
      rmSync(hang('logs'));
    }
  });
});

function execPath(command: string): string {
  for (const folder of (process.env.PATH ?? '').split(':')) {
    if (existsSync(path.join(folder, command))) return path.join(folder, command);
  }
  throw new Error(`${command} is not on PATH`);
}
