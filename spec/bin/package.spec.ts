// The package as a node gets it: `npm pack` of the built project, installed with npm offline into a fresh
// prefix, and the README's "Put it on a node" followed word by word (below a temporary root instead of /).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { cleanup, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';
import { specFolder } from '../../scripts/harness/temp.js';

const tmp = specFolder('ank-package-');
/** npm as on a node without network: the registry points nowhere and the cache is empty. */
const offline = (prefix: string): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH ?? '',
  HOME: tmp,
  npm_config_prefix: prefix,
  npm_config_registry: 'http://127.0.0.1:9/',
  npm_config_cache: path.join(tmp, 'npm-cache'),
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
});

/** The shell block of a README section. */
function readmeBlock(heading: string): string {
  const readme = readFileSync('README.md', 'utf8');
  const section = readme.slice(readme.indexOf(`## ${heading}\n`));
  return /```sh\n([\s\S]*?)```/.exec(section)![1];
}

/** The value of `key=` in a unit file. */
const unitValue = (unit: string, key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(unit)?.[1];

describe('the package for a node (npm pack, installed offline, the README followed)', function () {
  this.timeout(120_000);
  let tarball: string;
  const children: ChildProcess[] = [];
  before(function () {
    this.timeout(600_000);
    requirePodman();
    if (process.getuid?.() !== 0) this.skip();
    try {
      execFileSync('sh', ['-c', 'command -v systemd-analyze'], { stdio: 'ignore' });
    } catch {
      execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null'], { stdio: 'inherit' });
    }
    // The build is the test command's first step; `npm pack` would run it again (prepare).
    const name = execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', tmp], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
      .trim()
      .split('\n')
      .at(-1)!;
    tarball = path.join(tmp, name);
  });
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });

  it('holds the built agent (its start, its run and the code cache of its run, its logging and metrics libraries), the entry, the unit, README and LICENSE, and nothing of the sources, specs or bench', () => {
    const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').sort();
    expect(files).to.deep.equal(
      [
        'LICENSE',
        'README.md',
        'bin/ank-agent.cjs',
        'dist/bin/about.js',
        'dist/bin/ank-agent-run.cache',
        'dist/bin/ank-agent-run.cjs',
        'dist/bin/ank-agent.cjs',
        'dist/bin/prom-client.cjs',
        'dist/lib/defaults.js',
        'package.json',
        'scripts/ank-agent.service',
      ].map((f) => `package/${f}`),
    );
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
    expect(manifest.dependencies ?? {}, 'nothing to fetch on the node').to.deep.equal({});
  });

  it("installs offline as the README says, its unit verifies, and the unit's command connects to a server and stops on its signal", async () => {
    const prefix = path.join(tmp, 'readme-prefix');
    const root = path.join(tmp, 'root');
    mkdirSync(path.join(root, 'etc', 'systemd', 'system'), { recursive: true });
    const lines = readmeBlock('Put it on a node').trimEnd().split('\n');
    expect(lines.at(-1), 'the one line that needs a running systemd').to.equal('systemctl daemon-reload && systemctl enable --now ank-agent');
    const script = lines.slice(0, -1).join('\n').replaceAll(' /etc/', ` ${root}/etc/`).replaceAll('> /etc/', `> ${root}/etc/`);
    // The tarball lies where the README's command expects it: in the folder it runs in.
    execFileSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: path.dirname(tarball), env: offline(prefix), stdio: 'pipe' });

    expect(execFileSync(path.join(prefix, 'bin', 'ank-agent'), ['--version'], { encoding: 'utf8' })).to.match(/^ank-agent \d+\.\d+\.\d+\n/);
    const unit = readFileSync(path.join(root, 'etc', 'systemd', 'system', 'ank-agent.service'), 'utf8');
    const [binary, ...args] = unitValue(unit, 'ExecStart')!.split(' ');
    expect(binary).to.equal(path.join(prefix, 'bin', 'ank-agent'));
    expect(args).to.deep.equal(['--agent-config', '/etc/ankaios/ank-agent.conf']);
    expect(readFileSync(path.join(root, 'etc', 'ankaios', 'ank-agent.conf'), 'utf8')).to.match(/^name = 'agent_A'$/m);

    // The unit's command and environment, with a config of this test's (a loopback server without TLS).
    const server = await FakeAnkaiosServer.start();
    const name = uniqueAgent('unit');
    const config = path.join(tmp, 'ank-agent.conf');
    const run = mkdtempSync(path.join(tmp, 'run-'));
    writeFileSync(config, `version = 'v1'\nname = '${name}'\nserver_url = '${server.url}'\ninsecure = true\nrun_folder = '${run}'\n`);
    // The unit sets no environment: the agent runs as its launcher starts it.
    expect(unitValue(unit, 'Environment')).to.equal(undefined);
    const agent = spawn(binary, ['--agent-config', config, '--debug=server.out'], {
      env: { PATH: process.env.PATH ?? '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(agent);
    let said = '';
    agent.stderr!.on('data', (d: Buffer) => (said += d.toString()));
    try {
      const stream = await server.nextStream();
      const hello = await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      expect(hello.ToServerEnum.value).to.deep.include({ agentName: name });
      // The run is compiled once the hello went out.
      await until(() => said.includes('ank-agent: compiled from the code cache.'), 'the code cache to be taken under the unit');
      agent.kill(unitValue(unit, 'KillSignal') as NodeJS.Signals);
      expect(await new Promise((resolve) => agent.on('close', resolve))).to.equal(0);
    } finally {
      server.stop();
    }
  });

  it('runs a standalone manifest to Running(Ok) as installed offline into a fresh prefix', async () => {
    const prefix = path.join(tmp, 'plain-prefix');
    execFileSync('npm', ['install', '-g', '--offline', tarball], { env: offline(prefix), stdio: 'pipe' });
    const name = uniqueAgent('pkg');
    const manifest = path.join(tmp, `${name}.yaml`);
    writeFileSync(manifest, readFileSync('examples/hello.yaml', 'utf8').replaceAll('agent_A', name));
    const run = mkdtempSync(path.join(tmp, 'run-'));
    const agent = spawn(path.join(prefix, 'bin', 'ank-agent'), ['--manifest', manifest, '-r', run], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(agent);
    let log = '';
    agent.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    agent.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await until(() => /workload hello \([^)]*\): Running\(Ok\)/.test(log), 'hello to run', 40_000);
    } finally {
      agent.kill('SIGKILL');
      cleanup(name);
    }
  });
});
