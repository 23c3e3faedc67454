// The real bin, spawned as a user would run it.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { instanceId } from '../../lib/workload.js';
import { until } from '../../scripts/harness/wait.js';
import { FakeAnkaiosServer, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { busybox, cleanup, podmanServicesIn } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { specFolder } from '../../scripts/harness/temp.js';

const tmp = specFolder('ank-agent-cli-');
const RUN = path.join(tmp, 'run');
mkdirSync(RUN);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the agent to its end (it must end by itself). */
function runToEnd(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts the agent (`command`: how; Node on the entry unless given) and resolves once its stderr shows `pattern`. */
function startUntil(
  args: string[],
  pattern: RegExp,
  env: Record<string, string> = {},
  command: readonly string[] = [process.execPath, BIN],
): Promise<{ child: ChildProcess; stderr: () => string; exited: Promise<number | null> }> {
  const child = spawn(command[0], [...command.slice(1), ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not seen: ${pattern}; stderr: ${stderr}`)), 10_000);
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (pattern.test(stderr)) {
        clearTimeout(timer);
        resolve({ child, stderr: () => stderr, exited });
      }
    });
  });
}

/** A copy of the built agent (its entry, package.json and the `dist/bin` files named) in a new folder. */
function builtCopy(prefix: string, distFiles: readonly string[]): string {
  const copy = mkdtempSync(path.join(tmp, prefix));
  mkdirSync(path.join(copy, 'bin'));
  mkdirSync(path.join(copy, 'dist', 'bin'), { recursive: true });
  writeFileSync(path.join(copy, 'bin', 'ank-agent.cjs'), readFileSync(BIN), { mode: 0o755 });
  writeFileSync(path.join(copy, 'package.json'), readFileSync('package.json'));
  for (const file of distFiles) writeFileSync(path.join(copy, 'dist', 'bin', file), readFileSync(path.join('dist', 'bin', file)));
  return copy;
}

const expectFailure = (run: Run, message: string | RegExp) => {
  expect(run.code, run.stderr).to.equal(1);
  if (typeof message === 'string') expect(run.stderr).to.include(message);
  else expect(run.stderr).to.match(message);
  expect(run.stderr).not.to.match(/\n\s+at /, 'no stack trace');
};

describe('ank-agent (the command line)', () => {
  it('--help shows the usage and exits 0', async () => {
    const run = await runToEnd(['--help']);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.include('--server-url').and.include('--insecure').and.include('--ca_pem');
  });

  // swdd~agent-fails-on-missing-file-paths-and-insecure-cli-arguments~1
  it('neither --insecure nor PEM files: exits non-zero with the reason and the help', async () => {
    const run = await runToEnd(['-n', 'agent_A']);
    expectFailure(run, 'either --insecure (-k) for plain text, or --ca_pem, --crt_pem and --key_pem');
    expect(run.stderr).to.include('Usage');
  });

  // swdd~agent-supports-pem-file-paths-as-cli-arguments~1
  it('names the PEM files that are missing', async () => {
    expectFailure(await runToEnd(['-n', 'agent_A', '--ca_pem', '/x/ca.pem']), 'missing: --crt_pem, --key_pem');
  });

  // swdd~agent-naming-convention~1
  it('rejects an agent name with other characters than letters, digits, - and _, or longer than its workloads allow (63)', async () => {
    expectFailure(await runToEnd(['-n', 'agent.A', '-k']), "Invalid agent name 'agent.A': an agent name has 1 to 63 letters, digits, '-' or '_'.");
    expectFailure(await runToEnd(['-n', 'a'.repeat(64), '-k']), `Invalid agent name '${'a'.repeat(64)}'`);
  });

  it('rejects a server URL that is not http:// or https://', async () => {
    expectFailure(await runToEnd(['-n', 'agent_A', '-k', '-s', 'ftp://host:1']), "Invalid server URL 'ftp://host:1'");
  });

  it("runs the agent's run from a code cache made of exactly that bundle and its Node options; --debug says when it is not used", async () => {
    // A copy of the built agent whose run changed after its cache was made (same length, so V8 alone would take the cache).
    const copy = builtCopy('stale-', ['ank-agent.cjs', 'ank-agent-run.cache', 'about.js', 'prom-client.cjs']);
    const bundle = readFileSync(path.join('dist', 'bin', 'ank-agent-run.cjs'), 'utf8');
    expect(bundle).to.contain('Connecting to the server as agent');
    writeFileSync(
      path.join(copy, 'dist', 'bin', 'ank-agent-run.cjs'),
      bundle.replace('Connecting to the server as agent', 'Connecting TO the server as agent'),
    );
    // Run as shipped (a program, with its Node options), as the cache was made, until the run says it connects.
    const debugOf = async (...command: string[]) => {
      const args = ['-n', 'agent_cache', '-k', '-s', 'http://127.0.0.1:1', '-r', mkdtempSync(path.join(tmp, 'cache-')), '--debug'];
      const { child, stderr, exited } = await startUntil(args, /Connecting (to|TO) the server as agent/, {}, command);
      // Stopped as it stops (a kill would leave the Podman service it started for up to its idle time).
      child.kill('SIGTERM');
      await exited;
      return stderr();
    };
    const shipped = await debugOf(BIN);
    expect(shipped).to.contain('Connecting to the server as agent');
    expect(shipped).to.contain('ank-agent: compiled from the code cache.');
    const stale = await debugOf(path.join(copy, 'bin', 'ank-agent.cjs'));
    expect(stale).to.contain('Connecting TO the server as agent');
    expect(stale).to.contain('ank-agent: the code cache was made of another bundle: compiling without it.');
    // Under other Node options (as with another Node version) V8 rejects the cache: the bundle compiles without it.
    const otherOptions = await debugOf(process.execPath, '--max-semi-space-size=4', BIN);
    expect(otherOptions).to.contain('Connecting to the server as agent');
    expect(otherOptions).to.contain('ank-agent: V8 rejected the code cache (made by another Node version or under other options): compiled without it.');
  });

  it('compiles without the code cache when its data is damaged, or a FIFO or a folder stands in its place, and runs as it should', async () => {
    const data = readFileSync(path.join('dist', 'bin', 'ank-agent-run.cache'));
    const flipped = Buffer.from(data);
    // A byte in the middle of V8's data, past the two checksums: V8 would take it as it is.
    flipped[8 + Math.floor((flipped.length - 8) / 2)] ^= 0x40;
    const cases: [string, (cache: string) => void, string][] = [
      ['a flipped byte', (cache) => writeFileSync(cache, flipped), 'the code cache is damaged (its data does not match its checksum): compiling without it.'],
      ['a FIFO', (cache) => execFileSync('mkfifo', [cache]), 'no code cache (or not a regular file): compiling the bundle without it.'],
      ['a folder', (cache) => mkdirSync(cache), 'no code cache (or not a regular file): compiling the bundle without it.'],
    ];
    for (const [what, plant, said] of cases) {
      const copy = builtCopy('damaged-', ['ank-agent.cjs', 'ank-agent-run.cjs', 'about.js', 'prom-client.cjs']);
      plant(path.join(copy, 'dist', 'bin', 'ank-agent-run.cache'));
      const args = ['-n', 'agent_cache', '-k', '-s', 'http://127.0.0.1:1', '-r', mkdtempSync(path.join(tmp, 'cache-')), '--debug'];
      const { child, stderr, exited } = await startUntil(args, /Connecting to the server as agent/, {}, [path.join(copy, 'bin', 'ank-agent.cjs')]);
      expect(stderr(), what).to.contain(`ank-agent: ${said}`);
      expect(stderr(), what).not.to.contain('compiled from the code cache');
      // The agent it compiled is whole: it ends its stream and exits 0 on SIGTERM, as always.
      child.kill('SIGTERM');
      expect(await exited, `${what}: ${stderr()}`).to.equal(0);
    }
  });

  it('runs on when the reader of its log goes away: the lines are lost, not the agent', async () => {
    const server = await FakeAnkaiosServer.start();
    let agent: Awaited<ReturnType<typeof startUntil>> | undefined;
    try {
      agent = await startUntil(['-n', 'agent_unread', '-s', server.url, '-k', '-r', RUN], /connecting/);
      const stream = await server.nextStream();
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      // Its next line (the server accepted it) meets a pipe with no reader: EPIPE.
      agent.child.stderr!.destroy();
      stream.send({ FromServerEnum: { case: 'serverHello', value: {} } });
      await stream.waitFor((m) => m.ToServerEnum.case === 'AgentLoadStatus');
      const load = stream.received.filter((m) => m.ToServerEnum.case === 'AgentLoadStatus').length;
      // Still at work after the lost line: its load status goes out every 2 s.
      await until(() => stream.received.filter((m) => m.ToServerEnum.case === 'AgentLoadStatus').length > load, 'a later load status', 5000);
      agent.child.kill('SIGTERM');
      expect(await agent.exited).to.equal(0);
    } finally {
      // A failure above leaves no agent behind (nor the Podman service it started: it stops it on SIGTERM).
      if (agent?.child.exitCode === null && agent.child.signalCode === null) {
        agent.child.kill('SIGTERM');
        await agent.exited;
      }
      server.stop();
    }
  });

  it("--version prints the agent's version and the protocol lines it speaks", async () => {
    const run = await runToEnd(['--version']);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.equal(`ank-agent ${JSON.parse(readFileSync('package.json', 'utf8')).version}\nprotocol lines: 1 (says 1.0.1), 0.8 (says 0.8.0)\n`);
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it("works in $TMPDIR/ankaios/<name>_io/ by default; $TMPDIR/ankaios is made usable by every user, the io folder stays the agent's", async () => {
    const agent = await startUntil(['-n', 'agent_tmp', '-s', 'http://127.0.0.1:1', '-k'], /connecting/, { TMPDIR: tmp });
    expect(() => readFileSync(path.join(tmp, 'ankaios', 'agent_tmp_io'))).to.throw(/EISDIR/);
    expect(statSync(path.join(tmp, 'ankaios')).mode & 0o7777).to.equal(0o1777);
    expect(statSync(path.join(tmp, 'ankaios', 'agent_tmp_io')).mode & 0o777).to.equal(0o755);
    agent.child.kill('SIGTERM');
    await agent.exited;
    // Made by an agent of another user, the shared folder is not used: that user could move the io folders in it.
    chownSync(path.join(tmp, 'ankaios'), 65534, 65534);
    expectFailure(
      await runToEnd(['-n', 'agent_tmp2', '-k'], { TMPDIR: tmp }),
      `The run folder '${path.join(tmp, 'ankaios')}' belongs to another user (uid 65534)`,
    );
    chownSync(path.join(tmp, 'ankaios'), 0, 0);
    const second = await startUntil(['-n', 'agent_tmp2', '-s', 'http://127.0.0.1:1', '-k'], /connecting/, { TMPDIR: tmp });
    second.child.kill('SIGTERM');
    await second.exited;
    mkdirSync(path.join(tmp, 'ankaios', 'theirs_io'));
    chownSync(path.join(tmp, 'ankaios', 'theirs_io'), 65534, 65534);
    expectFailure(await runToEnd(['-n', 'theirs', '-k'], { TMPDIR: tmp }), 'belongs to another user (uid 65534)');
  });

  it("a custom run folder must exist and be a real folder of the agent's (no symlink); only the default one is created", async () => {
    expectFailure(await runToEnd(['-n', 'a', '-k', '-r', path.join(tmp, 'nowhere')]), `The run folder '${path.join(tmp, 'nowhere')}' does not exist`);
    symlinkSync(RUN, path.join(tmp, 'linked'));
    expectFailure(await runToEnd(['-n', 'a', '-k', '-r', path.join(tmp, 'linked')]), `The run folder '${path.join(tmp, 'linked')}' is a symbolic link`);
    symlinkSync('/etc', path.join(RUN, 'evil_io'));
    expectFailure(await runToEnd(['-n', 'evil', '-k', '-r', RUN]), `The run folder '${path.join(RUN, 'evil_io')}' is a symbolic link`);
  });

  it('an empty run folder and one in /proc are errors, not loops', async () => {
    expectFailure(await runToEnd(['-n', 'a', '-k', '-r', '']), 'The run folder is empty');
    expectFailure(await runToEnd(['-n', 'a', '-k', '-r', '/proc/self']), "The run folder '/proc/self' is in a kernel file system");
  });

  it('ANKAGENT_INSECURE=false overrides insecure = true of the file; a value that is no boolean is an error', async () => {
    const file = path.join(tmp, 'insecure.toml');
    writeFileSync(file, "version = 'v1'\nname = 'a'\ninsecure = true\n");
    expectFailure(await runToEnd(['-x', file, '-r', RUN], { ANKAGENT_INSECURE: 'false' }), 'No way to reach the server is given');
    expectFailure(await runToEnd(['-x', file, '-r', RUN], { ANKAGENT_INSECURE: 'maybe' }), "Invalid ANKAGENT_INSECURE='maybe': use true or false.");
  });

  it("rejects a server URL with an impossible port; one without a port is taken with the scheme's, as by the released agent", async () => {
    const agent = await startUntil(['-n', 'a', '-k', '-s', 'http://127.0.0.1', '-r', RUN], /connecting/);
    expect(agent.stderr()).to.include('connecting to http://127.0.0.1 (insecure)');
    agent.child.kill('SIGTERM');
    await agent.exited;
    expectFailure(await runToEnd(['-n', 'a', '-k', '-s', 'http://127.0.0.1:70000']), "Invalid server URL 'http://127.0.0.1:70000'");
    expectFailure(await runToEnd(['-n', 'a', '-k', '-s', 'http://127.0.0.1:0']), "Invalid server URL 'http://127.0.0.1:0'");
  });

  it('rejects unknown flags, a flag without its value and a value given to a switch, naming the flag, with the usage', async () => {
    const unknown = await runToEnd(['-n', 'agent_A', '-k', '--frobnicate']);
    expectFailure(unknown, "Unknown option '--frobnicate'");
    expect(unknown.stderr).to.include('Usage');
    expectFailure(await runToEnd(['-k', '-n']), "Option '-n, --name <value>' argument missing");
    expectFailure(await runToEnd(['-n', 'agent_A', '--insecure=yes']), "Option '-k, --insecure' does not take an argument");
  });

  describe('the agent config file (-x)', () => {
    const config = (name: string, text: string) => {
      const file = path.join(tmp, name);
      writeFileSync(file, text);
      return file;
    };

    it('reports a file that is not TOML, naming it', async () => {
      const file = config('bad.toml', 'version = v1\nname = [');
      expectFailure(await runToEnd(['-x', file]), `Cannot parse the agent config '${file}'`);
    });

    it('warns about unknown keys (the 1.x agent ignores them, so one file serves both) and reports wrong types', async () => {
      const unknown = await runToEnd(['-x', config('unknown.toml', "version = 'v1'\nnmae = 'x'\n")]);
      expect(unknown.stderr).to.match(/warn .*Unknown key 'nmae' .* is ignored/);
      expectFailure(unknown, 'The agent name is missing');
      expectFailure(await runToEnd(['-x', config('type.toml', "version = 'v1'\ninsecure = 'yes'\n")]), "The key 'insecure'");
      expectFailure(await runToEnd(['-x', config('tags.toml', "version = 'v1'\ntags = ['a']\n")]), "The key 'tags' in the agent config");
      expectFailure(await runToEnd(['-x', config('runtimes.toml', "version = 'v1'\nruntimes = 'podman'\n")]), 'must be a list of strings');
    });

    // swdd~agent-allows-enabled-runtimes~1
    it('runtimes = [...] enables only the runtimes it names: unknown names are warned about, none valid is an error', async () => {
      const refused = mkdtempSync(path.join(tmp, 'refused-'));
      const none = await runToEnd(['-x', config('none.toml', "version = 'v1'\nname = 'a'\ninsecure = true\nruntimes = ['docker']\n"), '-r', refused]);
      expectFailure(none, "No runtime is enabled: 'runtimes' lists 'docker'; this agent has 'podman', 'podman-kube', 'containerd', 'systemd'.");
      // Refused, it leaves no Podman service behind (one started for its run lives on until idle otherwise).
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(podmanServicesIn(refused)).to.deep.equal([]);
      const server = await FakeAnkaiosServer.start();
      try {
        const file = config('some.toml', `version = 'v1'\nname = 'rt_agent'\ninsecure = true\nserver_url = '${server.url}'\nruntimes = ['podman', 'docker']\n`);
        const agent = await startUntil(['-x', file, '-r', RUN], /which this agent does not have/);
        expect(agent.stderr()).to.include("The config names the runtime 'docker', which this agent does not have: ignored.");
        const stream = await server.nextStream();
        await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
        const kube = { workloadName: 'pod', agentName: 'rt_agent', id: instanceId('manifest: x') };
        stream.send({
          FromServerEnum: {
            case: 'serverHello',
            value: { addedWorkloads: [{ instanceName: kube, workload: { runtime: 'podman-kube', runtimeConfig: 'manifest: x' } }] },
          },
        });
        await until(() => reportedStates(stream).length >= 2, 'the state of the workload of a disabled runtime');
        expect(reportedStates(stream)).to.deep.equal([
          ['pod', kube.id, 'Pending(Starting): Triggered at runtime.'],
          ['pod', kube.id, 'Pending(StartingFailed): Unsupported Runtime'],
        ]);
        agent.child.kill('SIGTERM');
        await agent.exited;
      } finally {
        server.stop();
      }
    });

    it('tags: -t key=value (repeatable) wins over tags = {…} of the file; a malformed tag is an error', async () => {
      expectFailure(await runToEnd(['-n', 'a', '-k', '-t', 'novalue']), "Invalid tag 'novalue': give it as key=value.");
      const server = await FakeAnkaiosServer.start();
      try {
        const file = config('tagged.toml', `version = 'v1'\nname = 'tagged'\ninsecure = true\nserver_url = '${server.url}'\ntags = { zone = 'file' }\n`);
        const fromFile = await startUntil(['-x', file, '-r', RUN], /connecting/);
        const first = await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
        expect((first.ToServerEnum.value as { tags?: { tags: object } }).tags?.tags).to.deep.equal({ zone: 'file' });
        fromFile.child.kill('SIGTERM');
        await fromFile.exited;
        const fromFlags = await startUntil(['-x', file, '-r', RUN, '-t', 'zone=flag', '-t', 'owner=me=too'], /connecting/);
        const second = await (await server.nextStream(10_000, 1)).waitFor((m) => m.ToServerEnum.case === 'agentHello');
        expect((second.ToServerEnum.value as { tags?: { tags: object } }).tags?.tags).to.deep.equal({ zone: 'flag', owner: 'me=too' });
        fromFlags.child.kill('SIGTERM');
        await fromFlags.exited;
      } finally {
        server.stop();
      }
    });

    it('reports a missing or wrong version', async () => {
      expectFailure(await runToEnd(['-x', config('nover.toml', "name = 'a'\n")]), "must say version = 'v1'");
    });

    it('rejects a path and a content for the same PEM item', async () => {
      expectFailure(await runToEnd(['-x', config('both.toml', "version = 'v1'\nca_pem = '/a'\nca_pem_content = 'x'\n")]), "both 'ca_pem' and 'ca_pem_content'");
    });

    it('reports a config file that cannot be read', async () => {
      expectFailure(await runToEnd(['-x', path.join(tmp, 'nope.toml')]), 'Cannot read the agent config');
    });

    // swdd~agent-loads-config-file~2
    it('takes name, server URL and insecure from the file; flags override it', async () => {
      const server = await FakeAnkaiosServer.start();
      try {
        const file = config('ok.toml', `version = 'v1'\nname = 'from_file'\nserver_url = '${server.url}'\ninsecure = true\nrun_folder = '${RUN}'\n`);
        const agent = await startUntil(['-x', file, '-n', 'from_flag'], /connecting/);
        const stream = await server.nextStream();
        const hello = await stream.waitFor(() => true);
        expect(hello.ToServerEnum.value).to.deep.include({ agentName: 'from_flag' });
        agent.child.kill('SIGTERM');
        await agent.exited;
      } finally {
        server.stop();
      }
    });
  });

  describe('PEM files', () => {
    const certs = path.join(tmp, 'certs');
    before(() => execFileSync('bash', [path.resolve('scripts/make-test-certs.sh'), certs]));
    const pemArgs = (ca = 'ca.pem', crt = 'agent.pem', key = 'agent-key.pem') => [
      '-n',
      'agent_A',
      '-r',
      RUN,
      '--ca_pem',
      path.join(certs, ca),
      '--crt_pem',
      path.join(certs, crt),
      '--key_pem',
      path.join(certs, key),
    ];

    it('names an unreadable PEM file', async () => {
      expectFailure(await runToEnd(pemArgs('missing.pem')), `Cannot read the CA certificate file '${path.join(certs, 'missing.pem')}'`);
    });

    it('names a PEM file that is not a certificate', async () => {
      const junk = path.join(certs, 'junk.pem');
      writeFileSync(junk, '-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n');
      expectFailure(await runToEnd(pemArgs('ca.pem', 'junk.pem')), `The agent certificate file '${junk}' is not a valid PEM certificate`);
    });

    // swdd~grpc-checks-given-PEM-file-for-proper-unix-file-permission~2
    it('refuses a key file readable by group or others, and a certificate others may write', async () => {
      const loose = path.join(certs, 'loose-key.pem');
      writeFileSync(loose, readFileSync(path.join(certs, 'agent-key.pem')));
      chmodSync(loose, 0o644);
      expectFailure(
        await runToEnd(pemArgs('ca.pem', 'agent.pem', 'loose-key.pem')),
        `The agent key file '${loose}' has permissions 644: a private key may only be readable and writable by its owner ('chmod 600').`,
      );
      const shared = path.join(certs, 'shared-ca.pem');
      writeFileSync(shared, readFileSync(path.join(certs, 'ca.pem')));
      chmodSync(shared, 0o666);
      expectFailure(await runToEnd(pemArgs('shared-ca.pem')), `The CA certificate file '${shared}' has permissions 666`);
    });

    // swdd~grpc-checks-given-PEM-file-for-proper-unix-file-permission~2
    it('refuses an agent config that holds the key (key_pem_content) and that group or others may read', async () => {
      const config = path.join(certs, 'with-key.conf');
      const pem = (name: string) => JSON.stringify(readFileSync(path.join(certs, name), 'utf8'));
      writeFileSync(
        config,
        `version = 'v1'\nca_pem_content = ${pem('ca.pem')}\ncrt_pem_content = ${pem('agent.pem')}\nkey_pem_content = ${pem('agent-key.pem')}\n`,
      );
      chmodSync(config, 0o644);
      expectFailure(
        await runToEnd(['-n', 'agent_A', '-r', RUN, '-x', config]),
        `The agent config '${config}' holds the agent key ('key_pem_content') and has permissions 644: a private key may only be readable and writable by its owner ('chmod 600').`,
      );
    });

    it('-k together with some but not all PEM files is an error, as with the released agent', async () => {
      expectFailure(
        await runToEnd(['-n', 'agent_A', '-k', '--ca_pem', path.join(certs, 'ca.pem')]),
        'mTLS needs all three PEM files; missing: --crt_pem, --key_pem.',
      );
    });

    it('-k together with the three PEM files warns and uses TLS, as the reference agent does', async () => {
      const server = await FakeAnkaiosServer.start({
        tls: {
          ca: readFileSync(path.join(certs, 'ca.pem')),
          cert: readFileSync(path.join(certs, 'server.pem')),
          key: readFileSync(path.join(certs, 'server-key.pem')),
        },
      });
      try {
        const agent = await startUntil([...pemArgs(), '-k', '-s', server.url], /connecting/);
        await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
        expect(agent.stderr()).to.include('Insecure communication was asked for, but the three PEM files are given too: the agent uses mTLS.');
        agent.child.kill('SIGTERM');
        await agent.exited;
      } finally {
        server.stop();
      }
    });

    it('a key that does not belong to the certificate is an error at start', async () => {
      const otherKey = path.join(certs, 'other-key.pem');
      execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', otherKey], { stdio: 'ignore' });
      chmodSync(otherKey, 0o600);
      expectFailure(
        await runToEnd(pemArgs('ca.pem', 'agent.pem', 'other-key.pem')),
        `The agent key file '${otherKey}' does not belong to the agent certificate file '${path.join(certs, 'agent.pem')}'.`,
      );
    });

    it('takes the PEM paths from the environment when no flags give them', async () => {
      const server = await FakeAnkaiosServer.start({
        tls: {
          ca: readFileSync(path.join(certs, 'ca.pem')),
          cert: readFileSync(path.join(certs, 'server.pem')),
          key: readFileSync(path.join(certs, 'server-key.pem')),
        },
      });
      try {
        const agent = await startUntil(['-n', 'agent_A', '-r', RUN, '-s', server.url], /connecting/, {
          ANKAGENT_CA_PEM: path.join(certs, 'ca.pem'),
          ANKAGENT_CRT_PEM: path.join(certs, 'agent.pem'),
          ANKAGENT_KEY_PEM: path.join(certs, 'agent-key.pem'),
        });
        await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
        agent.child.kill('SIGTERM');
        await agent.exited;
      } finally {
        server.stop();
      }
    });
  });

  describe('running against a server', () => {
    let server: FakeAnkaiosServer;
    beforeEach(async () => (server = await FakeAnkaiosServer.start()));
    afterEach(() => server.stop());

    // swdd~agent-supports-cli-argument-for-insecure-communication~1, swdd~agent-establishes-insecure-communication-based-on-provided-insecure-cli-argument~1, swdd~agent-default-communication-grpc~1
    it('-k connects in plain text; ANKAGENT_INSECURE does too', async () => {
      const viaFlag = await startUntil(['-n', 'agent_A', '-s', server.url, '-k', '-r', RUN], /connecting/);
      await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
      viaFlag.child.kill('SIGTERM');
      await viaFlag.exited;
      const viaEnv = await startUntil(['-n', 'agent_B', '-s', server.url, '-r', RUN], /connecting/, { ANKAGENT_INSECURE: 'true' });
      const hello = await (await server.nextStream(10_000, 1)).waitFor((m) => m.ToServerEnum.case === 'agentHello');
      expect(hello.ToServerEnum.value).to.deep.include({ agentName: 'agent_B' });
      viaEnv.child.kill('SIGTERM');
      await viaEnv.exited;
    });

    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      it(`on ${signal} fails its stream, so that a v1.x server takes the agent as gone, and exits 0`, async () => {
        const agent = await startUntil(['-n', 'agent_A', '-s', server.url, '-k', '-r', RUN], /connecting/);
        const stream = await server.nextStream();
        await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
        agent.child.kill(signal);
        await stream.waitForEnd();
        expect(await agent.exited).to.equal(0);
        expect(stream.endedBy).to.equal('failure');
        expect(stream.received.map((m) => m.ToServerEnum.case)).to.not.include('goodbye');
      });
    }

    it("exits non-zero with the server's message when the server refuses the protocol version", async () => {
      const agent = await startUntil(['-n', 'agent_A', '-s', server.url, '-k', '-r', RUN], /connecting/);
      const stream = await server.nextStream();
      await stream.waitFor(() => true);
      stream.close(grpc.status.FAILED_PRECONDITION, 'Unsupported protocol version 0.8.0');
      expect(await agent.exited).to.equal(1);
      expect(agent.stderr()).to.include('The server refused the agent: Unsupported protocol version 0.8.0');
    });

    for (const size of [1000, 20_000]) {
      it(`exits 1 with a refusal of ${size} characters, cut to one line of sane length`, async () => {
        const agent = await startUntil(['-n', 'agent_A', '-s', server.url, '-k', '-r', RUN], /connecting/);
        const stream = await server.nextStream();
        await stream.waitFor(() => true);
        stream.close(grpc.status.FAILED_PRECONDITION, `Unsupported protocol version ${'x'.repeat(size)}`);
        expect(await agent.exited).to.equal(1);
        expect(agent.stderr()).to.match(new RegExp(`The server refused the agent: Unsupported protocol version x{470,500}… \\(${size + 29} characters\\)`));
        expect(agent.stderr().length).to.be.below(2000);
      });
    }

    it('never ends silently on a refusal too long for HTTP/2 to read (100 000 characters): it says the connection dropped and tries again', async function () {
      this.timeout(60_000);
      const agent = await startUntil(['-n', 'agent_A', '-s', server.url, '-k', '-r', RUN], /connecting/);
      const stream = await server.nextStream();
      await stream.waitFor(() => true);
      stream.close(grpc.status.FAILED_PRECONDITION, 'x'.repeat(100_000));
      // Keepalive (a ping every 10 s, then 20 s for its answer, as gRPC's) notices the connection nghttp2 closed under the call.
      await server.nextStream(45_000, 1);
      expect(agent.child.exitCode, 'still running').to.equal(null);
      expect(agent.stderr()).to.match(/No connection to the server \(.*\); retrying every second\./);
      agent.child.kill('SIGTERM');
      expect(await agent.exited).to.equal(0);
    });

    it('sends AgentLoadStatus every 2 seconds while connected', async () => {
      const agent = await startUntil(['-n', 'agent_load', '-s', server.url, '-k', '-r', RUN], /connecting/);
      const stream = await server.nextStream();
      // A server accepts an agent by answering its hello.
      await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      stream.send({ FromServerEnum: { case: 'serverHello', value: {} } });
      const loads = () => stream.received.filter((m) => m.ToServerEnum.case === 'AgentLoadStatus');
      // When each came, to 20 ms: the first right after the hello, the next ones 2 s apart.
      const arrivals: number[] = [];
      const deadline = Date.now() + 10_000;
      while (arrivals.length < 3 && Date.now() < deadline) {
        while (arrivals.length < loads().length) arrivals.push(Date.now());
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(arrivals, 'three load statuses').to.have.length(3);
      expect(arrivals[2] - arrivals[1], 'ms between two statuses').to.be.within(1700, 2500);
      const status = loads()[0].ToServerEnum.value as { agentName: string; cpuUsage?: { cpuUsage: number }; freeMemory?: { freeMemory: bigint } };
      expect(status.agentName).to.equal('agent_load');
      expect(status.cpuUsage!.cpuUsage).to.be.within(0, 100);
      expect(Number(status.freeMemory!.freeMemory)).to.be.above(0);
      agent.child.kill('SIGTERM');
      await agent.exited;
    });

    it('prepares <run folder>/<name>_io', async () => {
      const agent = await startUntil(['-n', 'agent_io', '-s', server.url, '-k', '-r', RUN], /connecting/);
      expect(() => readFileSync(path.join(RUN, 'agent_io_io'))).to.throw(/EISDIR/);
      agent.child.kill('SIGTERM');
      await agent.exited;
    });
  });

  it('keeps retrying an unreachable server, saying so, and stops cleanly on SIGINT', async () => {
    const agent = await startUntil(['-n', 'agent_A', '-s', 'http://127.0.0.1:1', '-k', '-r', RUN], /No connection to the server.*retrying every second/);
    agent.child.kill('SIGINT');
    expect(await agent.exited).to.equal(0);
    expect(agent.stderr()).not.to.match(/\n\s+at /);
  });

  it('--debug traces the messages passing the pipelines', async () => {
    const server = await FakeAnkaiosServer.start();
    try {
      const agent = await startUntil(['-n', 'agent_A', '-s', server.url, '-k', '-r', RUN, '--debug'], /connecting/);
      const stream = await server.nextStream();
      await stream.waitFor(() => true);
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [] } } });
      await startWaiting(() => /\[server\.in\] \{"kind":"serverHello"/.test(agent.stderr()));
      agent.child.kill('SIGTERM');
      await agent.exited;
    } finally {
      server.stop();
    }
  });

  it('--debug=workload,podman says what a waiting workload waits for, what its loop does, each podman call and the container change seen; other stages stay quiet', async () => {
    const server = await FakeAnkaiosServer.start();
    const name = `dbg_${process.pid}`;
    try {
      const agent = await startUntil(['-n', name, '-s', server.url, '-k', '-r', RUN, '--debug=workload,podman'], /connecting/);
      const stream = await server.nextStream();
      await stream.waitFor(() => true);
      const db = busybox('db', name, { script: 'sleep 3600' });
      const app = busybox('app', name, { dependencies: { db: 'Succeeded' } });
      stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(db), addedWorkload(app)] } } });
      await startWaiting(() => /\[workload\.loop\] db: reports Running\(Ok\)/.test(agent.stderr()), 20_000).catch((err: Error) => {
        throw new Error(`${err.message}; the agent said:\n${agent.stderr().slice(-4000)}`);
      });
      const said = agent.stderr();
      expect(said).to.match(/\[workload\.scheduler\] app waits for db to be Succeeded \((no state yet|now Pending\(Starting\)[^)]*\))\)/);
      expect(said).to.match(/\[workload\.loop\] db: command create/);
      expect(said).to.match(/\[podman\] run --detach --name db\.[0-9a-f]+\.[^ ]+ .*: ok in \d+\.\d{3} s/);
      expect(said, "the cache change that made db's state").to.match(/\[podman\.cache\] db\.[0-9a-f]+\.[^:]+: running \((poll|Podman's start event)\)/);
      expect(said, 'server stages not asked for').not.to.match(/\[server\.(in|out)\]/);
      agent.child.kill('SIGTERM');
      await agent.exited;
    } finally {
      server.stop();
      cleanup(name);
    }
  });
});

async function startWaiting(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
