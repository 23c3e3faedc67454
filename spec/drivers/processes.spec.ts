// The process driver (lib/drivers/processes.ts) starts the runtime CLIs' short calls from one long-lived /bin/sh, its
// launcher (real shell, real processes): what a server or a workload put into an argument reaches the command as it
// is, never as shell; the run that made it disposes it, and it leaves nothing.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { of } from 'rxjs';
import { privateParent } from '../../lib/drivers/launcher.js';
import { bytesRead } from '../../lib/drivers/machine.js';
import { type Background, type Ending, type Launch, Processes, type ProcessesOptions } from '../../lib/drivers/processes.js';
import { until } from '../../scripts/harness/wait.js';
import { Tmpfs, asNobody } from '../../scripts/harness/tmpfs.js';
import { specFolder } from '../../scripts/harness/temp.js';

const LIMITS = { maxStdout: 1024, maxStderr: 256 };

/** Runs a command through the driver to its end. */
function run(launcher: Processes, binary: string, args: string[], more: Partial<Launch> = {}): Promise<Ending> {
  return new Promise((resolve) => launcher.call({ binary, args, ...LIMITS, ...more }, resolve));
}

/** The drivers a spec made, disposed after it as the run disposes its own. */
const made: Processes[] = [];
function processes(options: ProcessesOptions = {}): Processes {
  const driver = new Processes(options);
  made.push(driver);
  return driver;
}
/** The parents of call folders a spec made, removed after it. */
const parents: string[] = [];
function tempParent(): string {
  const parent = specFolder('ank-launcher-');
  parents.push(parent);
  return parent;
}
afterEach(() => {
  made.splice(0).forEach((driver) => driver.dispose());
  parents.splice(0).forEach((parent) => rmSync(parent, { recursive: true, force: true }));
});

/** A driver whose shell has started a call and is then stopped (SIGSTOP), as a stuck shell is. */
async function stoppedShell(): Promise<{ launcher: Processes; shell: number }> {
  const launcher = processes();
  await run(launcher, 'true', []);
  const shell = launcher.shellPid!;
  process.kill(shell, 'SIGSTOP');
  return { launcher, shell };
}

const text = (ending: Ending) =>
  ending.kind === 'exited' ? { code: ending.code, stdout: ending.stdout.toString(), stderr: ending.stderr.toString() } : ending;

/** The processes whose parent is `pid`. */
const childrenOf = (pid: number) =>
  execFileSync('ps', ['-e', '-o', 'ppid=,pid='], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => Number(line.trim().split(/\s+/)[0]) === pid);

describe('The process driver (one shell starts the runtime CLI calls; swdd~podman-uses-podman-cli~1)', () => {
  it('passes every argument to the command exactly, whatever shell it looks like', async () => {
    const words = ["it's", 'a b', '$(touch /tmp/pwned)', '`id`', '"; exit 3; "', 'line\nbreak', '*', '-n', '', '\\', "''"];
    const ending = await run(processes(), '/usr/bin/printf', ['<%s>', ...words]);
    expect(text(ending)).to.deep.equal({ code: 0, stdout: words.map((w) => `<${w}>`).join(''), stderr: '' });
  });

  it('gives the input on stdin, and nothing of its own script otherwise', async () => {
    const launcher = processes();
    expect(text(await run(launcher, 'cat', [], { input: 'kind: Pod\n' }))).to.deep.equal({ code: 0, stdout: 'kind: Pod\n', stderr: '' });
    // Without input the command reads /dev/null, not the lines that start the next calls.
    const [reader] = await Promise.all([run(launcher, 'cat', []), run(launcher, 'true', [])]);
    expect(text(reader)).to.deep.equal({ code: 0, stdout: '', stderr: '' });
  });

  it('tells a failure by its exit code and what the command said on stderr, kept up to the limit', async () => {
    const ending = await run(processes(), 'sh', ['-c', 'printf "%0300d" 0 >&2; exit 3']);
    expect(ending.kind).to.equal('exited');
    if (ending.kind !== 'exited') return;
    expect(ending.code).to.equal(3);
    expect(ending.stderr.toString()).to.equal('0'.repeat(256));
  });

  it('ends a call whose output is over the limit as too much, reading no more than the limit', async () => {
    expect(await run(processes(), 'head', ['-c', '1025', '/dev/zero'])).to.deep.equal({ kind: 'too-much', code: 0 });
    expect(text(await run(processes(), 'head', ['-c', '1024', '/dev/zero']))).to.include({ code: 0 });
    // 64 MiB written: what this process read meanwhile (every read of it, /proc/self/io) stays far below that.
    const launcher = processes();
    await run(launcher, 'true', []);
    const before = bytesRead(process.pid)!;
    expect(await run(launcher, 'head', ['-c', String(64 * 2 ** 20), '/dev/zero'])).to.deep.equal({ kind: 'too-much', code: 0 });
    expect(bytesRead(process.pid)! - before).to.be.below(2 ** 20);
  });

  it('starts a service that lives on its own and tells once how it ended, or that it could not start', async () => {
    const ended: Background[] = [];
    const missing: Background[] = [];
    const service = processes().background({ binary: 'sh', args: ['-c', 'exit 3'] }, (how) => ended.push(how));
    processes().background({ binary: 'no-such-service-here', args: [] }, (how) => missing.push(how));
    expect(service.pid).to.be.a('number');
    await until(() => ended.length > 0 && missing.length > 0, 'both to end');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(ended).to.deep.equal([{ kind: 'exited', code: 3, signal: null }]);
    expect(missing.map((how) => how.kind)).to.deep.equal(['not-run']);
  });

  it('says a command that cannot be run could not be run, and whether it is missing; refuses a NUL in an argument', async () => {
    expect(await run(processes(), 'no-such-cli-here', ['ps'])).to.deep.equal({ kind: 'not-run', message: 'no-such-cli-here: not found', missing: true });
    const notExecutable = path.join(tempParent(), 'cli');
    writeFileSync(notExecutable, 'echo never\n', { mode: 0o644 });
    expect(await run(processes(), notExecutable, [])).to.deep.include({ kind: 'not-run', missing: false });
    expect(await run(processes(), 'echo', ['a\0b'])).to.deep.equal({ kind: 'not-run', message: 'an argument holds a NUL character.' });
  });

  it('kills a call asked to, whether or not its pid is known yet', async () => {
    const launcher = processes();
    let early: Ending | undefined;
    launcher.call({ binary: 'sleep', args: ['30'], ...LIMITS }, (ending) => (early = ending))('SIGKILL');
    let late: Ending | undefined;
    const kill = launcher.call({ binary: 'sleep', args: ['30'], ...LIMITS }, (ending) => (late = ending));
    await new Promise((resolve) => setTimeout(resolve, 300));
    kill('SIGTERM');
    await until(() => early !== undefined && late !== undefined, 'both calls to end');
    expect(text(early!)).to.include({ code: 137 });
    expect(text(late!)).to.include({ code: 143 });
  });

  it('gives a signal asked for before its call started once the call starts, even after its shell stalled', async () => {
    const { launcher, shell } = await stoppedShell();
    let ending: Ending | undefined;
    launcher.call({ binary: 'sleep', args: ['30'], ...LIMITS }, (e) => (ending = e))('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    process.kill(shell, 'SIGCONT');
    await until(() => ending !== undefined, 'the call to end', 10_000);
    expect(text(ending!)).to.include({ code: 143 });
  });

  it('leaves no process and no file behind once its calls have ended', async () => {
    const parent = tempParent();
    const launcher = processes({ parent: parent });
    await Promise.all(Array.from({ length: 20 }, (_, i) => run(launcher, 'echo', [String(i)], { input: i % 2 ? 'x' : undefined })));
    await until(() => childrenOf(launcher.shellPid!).length === 0, 'the subshells to be reaped');
    const [folder] = readdirSync(parent);
    expect(readdirSync(path.join(parent, folder))).to.deep.equal([]);
  });

  it('keeps its shell small however many calls it starts: each one is reaped and its pid forgotten once it has ended', async function () {
    this.timeout(120_000);
    const launcher = processes({ parent: tempParent() });
    const calls = async (n: number) => {
      for (let i = 0; i < n; i += 8) await Promise.all(Array.from({ length: 8 }, () => run(launcher, 'true', [])));
    };
    // The shell's memory (VmData) once warm, then after thousands of calls: a job or a name kept a call grows it by
    // some tens of bytes a call, ~200 KiB here.
    const data = () => Number(/VmData:\s+(\d+)/.exec(readFileSync(`/proc/${launcher.shellPid}/status`, 'utf8'))![1]);
    await calls(400);
    const before = data();
    await calls(4000);
    expect(data() - before).to.be.below(64);
  });

  it('makes its folder again when something removed it, and the calls go on', async () => {
    const parent = tempParent();
    const launcher = processes({ parent: parent });
    expect(text(await run(launcher, 'echo', ['before']))).to.deep.equal({ code: 0, stdout: 'before\n', stderr: '' });
    rmSync(path.join(parent, readdirSync(parent)[0]), { recursive: true });
    expect(text(await run(launcher, 'echo', ['after']))).to.deep.equal({ code: 0, stdout: 'after\n', stderr: '' });
  });

  it('removes the folders that agents killed before they could exit left, and no other', async () => {
    const parent = tempParent();
    const gone = spawnSync('true').pid;
    for (const name of [`ank-agent-calls-${gone}-dead01`, `ank-agent-calls-${process.pid}-live01`, 'unrelated']) {
      mkdirSync(path.join(parent, name));
      writeFileSync(path.join(parent, name, '3.out'), 'left');
    }
    symlinkSync('/etc', path.join(parent, `ank-agent-calls-${gone}-link01`));
    const launcher = processes({ parent: parent });
    await run(launcher, 'true', []);
    const left = readdirSync(parent).filter((name) => !name.startsWith(`ank-agent-calls-${process.pid}-`) || name.endsWith('live01'));
    expect(left).to.have.members([`ank-agent-calls-${gone}-link01`, `ank-agent-calls-${process.pid}-live01`, 'unrelated']);
    expect(existsSync('/etc/passwd')).to.equal(true);
  });

  it('disposed, it ends its shell and removes its folder, and a call in flight runs on to its end', async () => {
    const parent = tempParent();
    const launcher = new Processes({ parent });
    await run(launcher, 'true', []);
    const shell = launcher.shellPid!;
    const marker = path.join(parent, 'ran-on');
    launcher.call({ binary: 'sh', args: ['-c', `sleep 0.3; touch ${marker}`], ...LIMITS }, () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    launcher.dispose();
    await until(() => !existsSync(`/proc/${shell}`) || /^State:\s+Z/m.test(readFileSync(`/proc/${shell}/status`, 'utf8')), 'the shell to end');
    await until(() => existsSync(marker), 'the call in flight to end');
    expect(readdirSync(parent).filter((name) => name.startsWith('ank-agent-calls-'))).to.deep.equal([]);
  });

  it('disposed, it kills the streams and conversations still running, whoever still listens to them', async () => {
    const launcher = processes();
    const lines = launcher.lines({ binary: 'sleep', args: ['31.41'] }).subscribe({ error: () => undefined });
    const talk = launcher.conversation({ binary: 'sleep', args: ['31.42'] }, of()).subscribe({ error: () => undefined });
    const running = () => spawnSync('pgrep', ['-f', '^sleep 31\\.4[12]$'], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).length;
    await until(() => running() === 2, 'both to start');
    launcher.dispose();
    await until(() => running() === 0, 'both to be killed');
    lines.unsubscribe();
    talk.unsubscribe();
  });

  it('a piped call keeps the start of a flood of output and drops the rest, never failing for it; a kill ends it even when a child holds its pipes', async () => {
    const launcher = processes();
    const flood = await new Promise<Ending>((resolve) =>
      launcher.piped({ binary: 'sh', args: ['-c', 'head -c 100000 /dev/zero; head -c 5000 /dev/zero >&2; exit 4'], ...LIMITS }, resolve),
    );
    expect(flood.kind === 'exited' && [flood.code, flood.stdout.length, flood.stderr.length]).to.deep.equal([4, 1024, 256]);
    let held: Ending | undefined;
    const kill = launcher.piped({ binary: 'sh', args: ['-c', 'sleep 29.7 & exec sleep 30'], ...LIMITS }, (ending) => (held = ending));
    await new Promise((resolve) => setTimeout(resolve, 200));
    kill('SIGKILL');
    try {
      await until(() => held !== undefined, 'the killed call to end');
      expect(held).to.include({ kind: 'exited', code: 137 });
    } finally {
      spawnSync('pkill', ['-f', '^sleep 29.7$']);
    }
  });

  it("leaves a Ctrl-C at the agent's terminal to the agent: the call in flight runs to its end", async () => {
    // An agent in a process group of its own, as a terminal's foreground job is; SIGINT goes to the whole group.
    const script = `import { Processes } from ${JSON.stringify(path.resolve('lib/drivers/processes.ts'))};
      process.on('SIGINT', () => console.log('SIGINT'));
      const processes = new Processes();
      // Alive until the call ends, however slow the start under load.
      const alive = setInterval(() => undefined, 1000);
      processes.call({ binary: 'sleep', args: ['1'], maxStdout: 64, maxStderr: 64 }, (e) => { console.log(JSON.stringify(e)); processes.dispose(); clearInterval(alive); });
      console.log('called');`;
    const agent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    let said = '';
    agent.stdout.on('data', (chunk: Buffer) => (said += chunk.toString()));
    // Its own word that the call is made, not a child of its process: tsx may run esbuild as one while it loads,
    // before the SIGINT handler is there.
    await until(() => said.includes('called'), 'the call to be made');
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(-agent.pid!, 'SIGINT');
    await until(() => said.includes('"kind"'), 'the call to end');
    expect(said.split('\n').slice(0, 3)).to.deep.equal([
      'called',
      'SIGINT',
      JSON.stringify({ kind: 'exited', code: 0, stdout: { type: 'Buffer', data: [] }, stderr: { type: 'Buffer', data: [] } }),
    ]);
    agent.kill();
  });

  it('replaces a stuck shell: a call killed at its deadline before it started ends, and the next call runs', async () => {
    const { launcher, shell: stuck } = await stoppedShell();
    let ending: Ending | undefined;
    const kill = launcher.call({ binary: 'true', args: [], ...LIMITS }, (e) => (ending = e));
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect(ending).to.equal(undefined);
    kill('SIGKILL');
    await until(() => ending !== undefined, 'the call to end');
    expect(ending).to.deep.equal({ kind: 'not-run', message: 'the shell that starts it ended.' });
    expect(text(await run(launcher, 'echo', ['again']))).to.deep.equal({ code: 0, stdout: 'again\n', stderr: '' });
    expect(launcher.shellPid).not.to.equal(stuck);
  });

  it('fails the calls in flight when its shell is killed, and starts another shell for the next call', async () => {
    const launcher = processes();
    await run(launcher, 'true', []);
    const inFlight = run(launcher, 'sleep', ['5']);
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(launcher.shellPid!, 'SIGKILL');
    expect(await inFlight).to.deep.equal({ kind: 'not-run', message: 'the shell that starts it ended.' });
    expect(text(await run(launcher, 'echo', ['again']))).to.deep.equal({ code: 0, stdout: 'again\n', stderr: '' });
  });

  describe('where its files go', () => {
    const fs = new Tmpfs();
    const tmpfs = (options: string) => fs.mount(options);
    afterEach(() => fs.unmountAll());

    it('is a place no other user can fill: /run as root, never the temporary folder', function () {
      if (process.getuid?.() !== 0) this.skip();
      expect(privateParent()).to.equal('/run');
    });

    it('never reads output its file system could not keep as "nothing": the call fails, and works again once there is room', async () => {
      const dir = tmpfs('size=64k');
      const launcher = processes({ parent: dir });
      expect(text(await run(launcher, 'echo', ['[]']))).to.deep.equal({ code: 0, stdout: '[]\n', stderr: '' });
      asNobody(`dd if=/dev/zero of=${dir}/fill bs=4k`);
      // As Podman and nerdctl do: exit 0 whether or not their output could be written.
      expect(await run(launcher, 'sh', ['-c', 'echo "[]"; exit 0'])).to.include({ kind: 'output-lost', code: 0 });
      expect(await run(launcher, 'sh', ['-c', 'echo why >&2; exit 3'])).to.include({ kind: 'output-lost', code: 3 });
      rmSync(path.join(dir, 'fill'));
      expect(text(await run(launcher, 'echo', ['[]']))).to.deep.equal({ code: 0, stdout: '[]\n', stderr: '' });
    });

    it('still kills a call on a full file system, where no file can note its pid, and tells its pid', async () => {
      const dir = tmpfs('size=64k');
      const launcher = processes({ parent: dir });
      await run(launcher, 'true', []);
      asNobody(`dd if=/dev/zero of=${dir}/fill bs=4k`);
      let ending: Ending | undefined;
      const kill = launcher.call({ binary: 'sleep', args: ['30'], ...LIMITS }, (e) => (ending = e));
      await until(() => kill.pid() !== undefined, 'its pid to be told');
      expect(readFileSync(`/proc/${kill.pid()}/cmdline`, 'utf8')).to.equal('sleep\x0030\x00');
      kill('SIGTERM');
      await until(() => ending !== undefined, 'the killed call to end');
      // Its output could not be kept (the marks), but it was killed: not left to its 30 s.
      expect(ending).to.include({ kind: 'output-lost', code: 143 });
    });

    for (const [what, options, fill] of [
      ['no inode left', 'nr_inodes=8', 'i=0; while touch f$i; do i=$((i+1)); done'],
      ['a read-only place', 'ro,size=64k', 'true'],
    ] as const) {
      it(`with ${what} it starts the calls directly and says why once: arguments, input, output, exit codes and kills as through the shell`, async () => {
        const dir = tmpfs(options);
        asNobody(`cd ${dir} && ${fill}`);
        const warned: string[] = [];
        const launcher = processes({ parent: dir, warn: (t) => warned.push(t) });
        const words = ["it's", '$(id)', 'line\nbreak', ''];
        expect(text(await run(launcher, '/usr/bin/printf', ['<%s>', ...words]))).to.deep.equal({
          code: 0,
          stdout: words.map((w) => `<${w}>`).join(''),
          stderr: '',
        });
        expect(text(await run(launcher, 'cat', [], { input: 'kind: Pod\n' }))).to.deep.equal({ code: 0, stdout: 'kind: Pod\n', stderr: '' });
        expect(text(await run(launcher, 'sh', ['-c', 'echo why >&2; exit 3']))).to.deep.equal({ code: 3, stdout: '', stderr: 'why\n' });
        expect(await run(launcher, 'head', ['-c', '1025', '/dev/zero'])).to.deep.equal({ kind: 'too-much', code: 0 });
        expect(await run(launcher, 'no-such-cli-here', [])).to.deep.equal({ kind: 'not-run', message: 'no-such-cli-here: not found', missing: true });
        let killed: Ending | undefined;
        launcher.call({ binary: 'sleep', args: ['30'], ...LIMITS }, (e) => (killed = e))('SIGKILL');
        await until(() => killed !== undefined, 'the killed call to end');
        expect(text(killed!)).to.include({ code: 137 });
        expect(warned).to.have.length(1);
        expect(warned[0]).to.match(
          new RegExp(`^Cannot make a folder for the runtime calls' output in ${dir} \\((ENOSPC|EROFS).*they are started directly\\.$`),
        );
      });
    }
  });
});
