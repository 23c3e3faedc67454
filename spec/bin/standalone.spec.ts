// Standalone mode: the real agent process runs a manifest on real Podman, without a server.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { parseManifest } from '../../lib/codec/manifest.js';
import { specsFor } from '../../lib/desired-state.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { cleanup, podman, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { BIN } from '../../scripts/harness/agent.js';
import { specFolder } from '../../scripts/harness/temp.js';

const tmp = specFolder('ank-standalone-');
mkdirSync(path.join(tmp, 'run'));

interface Agent {
  child: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

function start(manifest: string, ...args: string[]): Agent {
  const child = spawn(process.execPath, [BIN, '--manifest', manifest, '-r', path.join(tmp, 'run'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  return { child, log: () => log, exited: new Promise((r) => child.on('close', r)) };
}

/** A TCP port nothing listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** `workload: state` lines of the status log, in order. */
const states = (log: string) => [...log.matchAll(/workload (\w+) \([^)]*\): (.*)$/gm)].map((m) => `${m[1]}: ${m[2]}`);

/** The agents of the running test, killed after it. */
const agents: Array<[Agent, string]> = [];

/** Waits for the condition; a time-out shows the end of each agent's log, which says what went on. */
async function until(condition: () => boolean, what: string, timeoutMs = 40_000): Promise<void> {
  for (let waited = 0; !condition(); waited += 100) {
    if (waited > timeoutMs) throw new Error(`timed out waiting for ${what}; the agent said:\n${agents.map(([a]) => a.log().slice(-4000)).join('\n---\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function manifestFor(agentName: string, example: string): string {
  const file = path.join(tmp, `${agentName}.yaml`);
  writeFileSync(file, readFileSync(path.resolve('examples', example), 'utf8').replaceAll('agent_A', agentName));
  return file;
}

describe('ank-agent --manifest (standalone mode)', function () {
  this.timeout(120_000);
  before(requirePodman);
  afterEach(async () => {
    for (const [agent, name] of agents.splice(0)) {
      agent.child.kill('SIGKILL');
      await agent.exited;
      cleanup(name);
    }
  });

  it('runs the dependency example in the order its dependencies demand', async () => {
    const name = uniqueAgent('deps');
    const agent = start(manifestFor(name, 'dependencies.yaml'));
    agents.push([agent, name]);
    await until(() => states(agent.log()).includes('error_handler: Succeeded(Ok)'), 'error_handler to finish');
    const seen = states(agent.log());
    const at = (line: string) => {
      const i = seen.indexOf(line);
      expect(i, `${line} in ${seen.join(' | ')}`).to.be.at.least(0);
      return i;
    };
    expect(at('init_storage: Succeeded(Ok)')).to.be.below(at('storage_provider: Pending(Starting): Triggered at runtime.'));
    expect(at('storage_provider: Running(Ok)')).to.be.below(at('logger: Pending(Starting): Triggered at runtime.'));
    expect(at("storage_provider: Failed(ExecFailed): Exit code: '1'")).to.be.below(at('error_handler: Pending(Starting): Triggered at runtime.'));
    expect(at('logger: Pending(WaitingToStart)')).to.be.below(at('logger: Pending(Starting): Triggered at runtime.'));
  });

  it('follows the manifest through a ConfigMap-style ..data symlink swap and through a folder replaced as a whole', async () => {
    const name = uniqueAgent('swap');
    const base = mkdtempSync(path.join(tmp, 'cm-'));
    const folder = path.join(base, 'config');
    const version = (tag: string, extra: string) => {
      const dir = path.join(folder, `..${tag}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'manifest.yaml'), readFileSync(path.resolve('examples', 'hello.yaml'), 'utf8').replaceAll('agent_A', name) + extra);
      return `..${tag}`;
    };
    const workload = (w: string) =>
      `  ${w}:\n    runtime: podman\n    agent: ${name}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandOptions: ["--stop-timeout", "1"]\n      commandArgs: ["/bin/sleep", "3600"]\n`;
    symlinkSync(version('v1', ''), path.join(folder, '..data'));
    symlinkSync('..data/manifest.yaml', path.join(folder, 'manifest.yaml'));
    const agent = start(path.join(folder, 'manifest.yaml'));
    agents.push([agent, name]);
    await until(() => states(agent.log()).some((s) => s.startsWith('hello: ')), 'the first manifest');
    // A ConfigMap update: a new folder, then the ..data symlink swapped in one rename.
    symlinkSync(version('v2', workload('second')), path.join(folder, '..data_tmp'));
    renameSync(path.join(folder, '..data_tmp'), path.join(folder, '..data'));
    await until(() => states(agent.log()).includes('second: Running(Ok)'), 'the swapped-in workload to run');
    // The whole folder replaced.
    renameSync(folder, `${folder}.old`);
    mkdirSync(folder);
    writeFileSync(path.join(folder, 'manifest.yaml'), readFileSync(path.join(`${folder}.old`, '..v2', 'manifest.yaml'), 'utf8') + workload('third'));
    await until(() => states(agent.log()).includes('third: Running(Ok)'), 'the workload of the new folder to run');
  });

  it('applies an edit of the manifest, rejects an invalid one keeping the workloads, and leaves them running on SIGTERM', async () => {
    const name = uniqueAgent('edit');
    const file = manifestFor(name, 'hello.yaml');
    const agent = start(file);
    agents.push([agent, name]);
    await until(() => states(agent.log()).includes('hello: Running(Ok)'), 'hello to run');
    writeFileSync(
      file,
      `${readFileSync(file, 'utf8')}  second:\n    runtime: podman\n    agent: ${name}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: ["/bin/sleep", "3600"]\n`,
    );
    await until(() => states(agent.log()).includes('second: Running(Ok)'), 'the added workload to run');
    writeFileSync(file, 'apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    dependencies: {a: ADD_COND_RUNNING}\n');
    await until(() => /Rejected the change of .*the dependencies form a cycle: a -> a\. The workloads stay as they are\./.test(agent.log()), 'the rejection');
    agent.child.kill('SIGTERM');
    expect(await agent.exited).to.equal(0);
    const after = states(agent.log());
    expect(after.filter((s) => /Stopping|Removed/.test(s))).to.deep.equal([]);
  });

  it('reads the agent config (-x) as connected mode does: runtimes, health checks and metrics, and refuses a bad value', async () => {
    const name = uniqueAgent('conf');
    const port = await freePort();
    const config = path.join(tmp, `${name}.toml`);
    writeFileSync(config, `version = 'v1'\nruntimes = ['podman']\nhealth_checks = false\nmetrics = '127.0.0.1:${port}'\n`);
    const manifest = path.join(tmp, `${name}.yaml`);
    // A check that never passes: with the agent's checks off it does not matter. A podman-kube workload: not enabled.
    writeFileSync(
      manifest,
      `apiVersion: v1\nworkloads:\n  checked:\n    runtime: podman\n    agent: ${name}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandOptions: ["--health-cmd", "false", "--health-interval", "1s"]\n      commandArgs: ["/bin/sleep", "3600"]\n  pod:\n    runtime: podman-kube\n    agent: ${name}\n    runtimeConfig: |\n      manifest: "kind: Pod"\n`,
    );
    const agent = start(manifest, '-x', config);
    agents.push([agent, name]);
    await until(() => states(agent.log()).includes('checked: Running(Ok)'), 'the checked workload to run');
    await until(() => states(agent.log()).some((s) => s.startsWith('pod: Pending(StartingFailed)')), 'the podman-kube workload to be refused');
    const scraped = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(scraped).to.match(/^ank_agent_info\{/m);
    await new Promise((r) => setTimeout(r, 2500));
    expect(agent.log(), 'an unchanged manifest is no change').not.to.include('Applying the changed manifest');

    writeFileSync(config, `version = 'v1'\nhealth_checks = 'yes'\n`);
    const refused = start(manifest, '-x', config);
    expect(await refused.exited).to.equal(1);
    expect(refused.log()).to.include(`The key 'health_checks' in the agent config '${config}' must be a boolean.`);
    expect(refused.log()).not.to.match(/\n\s+at /);
  });

  it('rejects a manifest with a cycle or without apiVersion at the start, naming the problem', async () => {
    const cyclic = path.join(tmp, 'cycle.yaml');
    writeFileSync(
      cyclic,
      'apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    dependencies: {b: ADD_COND_RUNNING}\n  b:\n    runtime: podman\n    dependencies: {a: ADD_COND_RUNNING}\n',
    );
    const c = start(cyclic);
    expect(await c.exited).to.equal(1);
    expect(c.log()).to.include('the dependencies form a cycle: a -> b -> a');
    const unversioned = path.join(tmp, 'noversion.yaml');
    writeFileSync(unversioned, 'workloads: {}\n');
    const u = start(unversioned);
    expect(await u.exited).to.equal(1);
    expect(u.log()).to.include("'apiVersion' is missing");
    expect(u.log()).not.to.match(/\n\s+at /);
  });

  it('a signal that comes again while it stops changes nothing: it lets go of all it holds and exits 0', async () => {
    const name = uniqueAgent('twice');
    const agent = start(manifestFor(name, 'hello.yaml'));
    agents.push([agent, name]);
    await until(() => states(agent.log()).includes('hello: Running(Ok)'), 'hello to run');
    const pid = agent.child.pid!;
    const callFolders = () => readdirSync('/run').filter((entry) => entry.startsWith(`ank-agent-calls-${pid}-`));
    expect(callFolders()).to.have.length(1);
    // As `timeout -s INT` and a Ctrl-C pressed again do: the signal again and again until the agent is gone.
    agent.child.kill('SIGINT');
    const again = setInterval(() => agent.child.exitCode === null && agent.child.signalCode === null && agent.child.kill('SIGINT'), 1);
    try {
      expect(await agent.exited).to.equal(0);
    } finally {
      clearInterval(again);
    }
    expect(agent.log().match(/SIGINT: stopping\./g)).to.have.length(1);
    expect(callFolders()).to.deep.equal([]);
  });

  it('--delete-on-exit deletes the workloads before the agent stops', async () => {
    const name = uniqueAgent('del');
    const agent = start(manifestFor(name, 'hello.yaml'), '--delete-on-exit');
    agents.push([agent, name]);
    await until(() => states(agent.log()).includes('hello: Running(Ok)'), 'hello to run');
    agent.child.kill('SIGTERM');
    expect(await agent.exited).to.equal(0);
    expect(agent.log()).to.include('hello: no longer in the manifest');
    expect(podman('ps', '--all', '--quiet', `--filter=label=agent=${name}`)).to.equal('');
  });

  it('answers the Control Interface locally: CompleteStateRequest with field masks, UpdateStateRequest applied to the desired state', async () => {
    const name = uniqueAgent('ctl');
    const file = path.join(tmp, `${name}.yaml`);
    writeFileSync(
      file,
      `apiVersion: v1
workloads:
  ctl:
    runtime: podman
    agent: ${name}
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMask: ["desiredState.workloads"]
    runtimeConfig: |
      image: localhost/busybox:latest
      commandOptions: ["--stop-timeout", "1"]
      commandArgs: ["/bin/sleep", "3600"]
`,
    );
    const agent = start(file);
    agents.push([agent, name]);
    await until(() => states(agent.log()).includes('ctl: Running(Ok)'), 'ctl to run');
    const [ctl] = specsFor(name, parseManifest(readFileSync(file, 'utf8')));
    const client = new ControlInterfaceClient(path.join(tmp, 'run', `${name}_io`, `ctl.${ctl.instanceName.id}`, 'control_interface'));
    try {
      client.hello();
      expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
      client.askState('q1', 'desiredState.workloads.ctl.agent');
      const response = (await client.next()).FromAnkaiosEnum.value as unknown as {
        requestId: string;
        ResponseContent: { case: string; value: { completeState: { desiredState: { workloads: { workloads: Record<string, { agent: string }> } } } } };
      };
      const state = { requestId: response.requestId, ResponseContent: { value: response.ResponseContent.value.completeState } };
      expect(state.requestId).to.equal('q1');
      expect(state.ResponseContent.value.desiredState.workloads.workloads).to.deep.equal({
        ctl: { ...state.ResponseContent.value.desiredState.workloads.workloads.ctl, agent: name },
      });
      client.send({
        ToAnkaiosEnum: {
          case: 'request',
          value: {
            requestId: 'u1',
            RequestContent: {
              case: 'updateStateRequest',
              value: {
                updateMask: ['desiredState.workloads.added'],
                newState: {
                  desiredState: {
                    workloads: {
                      workloads: {
                        added: { agent: name, runtime: 'podman', runtimeConfig: 'image: localhost/busybox:latest\ncommandArgs: ["/bin/sleep", "3600"]\n' },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      });
      const success = (await client.next()).FromAnkaiosEnum.value as {
        requestId: string;
        ResponseContent: { case: string; value: { addedWorkloads: string[] } };
      };
      expect(success.requestId).to.equal('u1');
      expect(success.ResponseContent.case).to.equal('UpdateStateSuccess');
      expect(success.ResponseContent.value.addedWorkloads[0]).to.match(new RegExp(`^added\\.[0-9a-f]{64}\\.${name}$`));
      await until(() => states(agent.log()).includes('added: Running(Ok)'), 'the added workload to run');
    } finally {
      client.close();
    }
  });
});
