// Podman asked through its running service (lib/runtimes/podman/service.ts), on real Podman: the calls that
// take it, the containers it makes, and what happens when the service is killed, stalls or is not Podman's.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { silentLogger } from '../../lib/logger.js';
import { PodmanService } from '../../lib/runtimes/podman/service.js';
import { podmanFigures } from '../../lib/runtimes/podman/stats.js';
import { lastValueFrom } from 'rxjs';
import { IMAGE, PodmanAgent, busybox, cleanup, harnessPodman, moduleSettings, podman, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { makeRuntimes } from '../../bin/wiring.js';
import { until } from '../../scripts/harness/wait.js';
import { harnessCli, harnessProcesses } from '../../scripts/harness/processes.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** A call of the CLI as it was told: its subcommand and the way it took. */
interface Call {
  readonly subcommand: string;
  readonly via?: string;
  readonly outcome?: string;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('Podman through its service (real Podman)', function () {
  this.timeout(90_000);
  before(requirePodman);
  const folders: string[] = [];
  const pids: number[] = [];
  let agent: PodmanAgent | undefined;
  afterEach(() => {
    agent?.stop();
    agent = undefined;
    for (const pid of pids.splice(0)) {
      try {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  /** A service of its own in a new folder, a CLI through it that notes each call's way, and the agent on them. */
  function servedAgent(prefix: string, systemSocket?: string) {
    const folder = specFolder('ank-service-');
    folders.push(folder);
    const notes: string[] = [];
    const service = new PodmanService({ cli: harnessCli('podman'), folder, log: silentLogger, systemSocket, note: (text) => notes.push(text) });
    const calls: Call[] = [];
    const cli = harnessCli('podman', { observe: ({ subcommand, via, outcome }) => calls.push({ subcommand, via, outcome }) });
    const pid = () => {
      const socket = service.socket;
      return socket && existsSync(`${socket}.pid`) ? Number(readFileSync(`${socket}.pid`, 'utf8')) : undefined;
    };
    service.warm();
    agent = new PodmanAgent(uniqueAgent(prefix), undefined, cli, { service });
    /** Resolves once the service answers; its process is killed after the test. */
    const up = async () => {
      await until(() => service.socket !== undefined, 'the service is up');
      pids.push(pid()!);
    };
    return { agent, service, cli, calls, notes, folder, pid, up };
  }

  /** A workload sleeping in the local busybox with `commandOptions`. */
  const sleeping = (name: string, agentName: string, commandOptions: readonly string[]) =>
    spec(
      name,
      agentName,
      'podman',
      `image: ${IMAGE}\ncommandOptions: ${JSON.stringify(['--stop-timeout', '1', ...commandOptions])}\ncommandArgs: ["sleep", "3600"]\n`,
    );

  /** The agent's containers as `<name> <state>`, by the local CLI. */
  const containersOf = (agentName: string) =>
    (JSON.parse(podman('ps', '--all', '--format=json', `--filter=label=agent=${agentName}`) || '[]') as { Names: string[]; State: string }[]).map(
      (c) => `${c.Names[0]} ${c.State}`,
    );

  // rx~podman-service~1
  it("creates go by the remote client, lists and removes by REST once the service is up, and the containers are Podman's own (the local CLI sees them)", async () => {
    const { agent, calls, up } = servedAgent('served');
    await up();
    const workloads = ['a', 'b', 'c'].map((name) => busybox(name, agent.agentName));
    agent.send({ kind: 'serverHello', added: workloads });
    for (const w of workloads) await agent.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/);
    expect(calls.filter((c) => c.subcommand === 'run').map((c) => c.via)).to.deep.equal(['service', 'service', 'service']);
    // Each list by REST, and at least one made: the set of the ways is exactly that one.
    expect(new Set(calls.filter((c) => c.subcommand === 'ps').map((c) => c.via))).to.deep.equal(new Set(['service (REST)']));
    expect(containersOf(agent.agentName).sort()).to.have.length(3);
    agent.send({ kind: 'updateWorkload', added: [], deleted: workloads.map((w) => ({ instanceName: w.instanceName, dependencies: {} })) });
    await until(() => containersOf(agent.agentName).length === 0, 'all removed');
    await until(() => calls.filter((c) => c.subcommand === 'rm').length === 3, 'three removes told');
    expect(calls.filter((c) => c.subcommand === 'rm').map((c) => c.via)).to.deep.equal(['service (REST)', 'service (REST)', 'service (REST)']);
  });

  // rx~podman-service~1
  it('a run with an option the remote client lacks goes to the local CLI and says why', async () => {
    const { agent, calls, folder, up } = servedAgent('local');
    await up();
    const w = sleeping('pidfile', agent.agentName, ['--pidfile', `${folder}/c.pid`]);
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('pidfile', /^Running\(Ok\)$/);
    expect(calls.find((c) => c.subcommand === 'run')?.via).to.equal('CLI (the remote client has no --pidfile)');
  });

  // rx~podman-service-fallback~1
  it('the service killed in a burst of creates and deletes: every workload ends as asked, none made twice, and a new service takes over', async () => {
    const { agent, service, calls, notes, pid } = servedAgent('killed');
    await until(() => service.socket !== undefined, 'the service is up');
    const first = pid()!;
    const workloads = Array.from({ length: 12 }, (_, i) => busybox(`w${i}`, agent.agentName));
    agent.send({ kind: 'serverHello', added: workloads });
    await until(() => calls.some((c) => c.subcommand === 'run' && c.via === 'service'), 'a create through the service');
    process.kill(first, 'SIGKILL');
    // Where one does not run, the service's notes and the calls' ways and outcomes say where it stopped.
    for (const w of workloads)
      await agent.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/, 60_000).catch((err: Error) => {
        const ways = calls.map((c) => `${c.subcommand} by ${c.via ?? 'the CLI'}: ${c.outcome}`);
        throw new Error(`${err.message}\nthe service: ${notes.join('; ')}\nthe calls: ${ways.join('; ')}`);
      });
    const names = containersOf(agent.agentName);
    expect(names, 'one running container per workload').to.have.length(12);
    expect(names.every((n) => n.endsWith(' running'))).to.equal(true);
    expect(
      notes.some((n) => n.startsWith('service down')),
      notes.join('; '),
    ).to.equal(true);
    await until(() => service.socket !== undefined && pid() !== first, 'a new service', 20_000);
    pids.push(pid()!);
    agent.send({ kind: 'updateWorkload', added: [], deleted: workloads.slice(0, 6).map((w) => ({ instanceName: w.instanceName, dependencies: {} })) });
    process.kill(pid()!, 'SIGKILL');
    await until(() => containersOf(agent.agentName).length === 6, 'the six deleted are gone', 60_000);
  });

  /** The conmon processes of the agent's containers that Podman does not list (not even with --external): nobody manages them. */
  const unmanaged = (agentName: string) => {
    const listed = new Set(podman('ps', '--all', '--external', '--no-trunc', '--format', '{{.ID}}').split('\n'));
    return readdirSync('/proc')
      .filter((pid) => /^\d+$/.test(pid))
      .flatMap((pid) => {
        try {
          return [readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')];
        } catch {
          return [];
        }
      })
      .filter((argv) => argv[0]?.endsWith('conmon') && argv[argv.indexOf('-n') + 1]?.endsWith(`.${agentName}`) && !listed.has(argv[argv.indexOf('-c') + 1]))
      .map((argv) => argv[argv.indexOf('-n') + 1]);
  };

  // rx~podman-service-fallback~1
  it('the service SIGKILLed twice in a burst of 20 creates, then stopped (SIGSTOP) in 10 more: one container a workload, nothing left outside Podman', async () => {
    const { agent, service, pid } = servedAgent('lost');
    const upAgain = async (not: number) => {
      await until(() => service.socket !== undefined && pid() !== undefined && pid() !== not, 'a service up', 30_000);
      pids.push(pid()!);
      return pid()!;
    };
    const first = await upAgain(0);
    const burst = Array.from({ length: 20 }, (_, i) => busybox(`w${i}`, agent.agentName));
    agent.send({ kind: 'serverHello', added: burst });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    process.kill(first, 'SIGKILL');
    const second = await upAgain(first);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    process.kill(second, 'SIGKILL');
    for (const w of burst) await agent.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/, 90_000);
    const third = await upAgain(second);
    const more = Array.from({ length: 10 }, (_, i) => busybox(`m${i}`, agent.agentName));
    agent.send({ kind: 'updateWorkload', added: more, deleted: [] });
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(third, 'SIGSTOP');
    for (const w of more) await agent.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/, 90_000);
    await until(() => !alive(third), 'the stopped service to be killed', 30_000);
    const names = containersOf(agent.agentName);
    expect(names, 'one running container per workload').to.have.length(30);
    expect(names.every((n) => n.endsWith(' running'))).to.equal(true);
    expect(unmanaged(agent.agentName)).to.deep.equal([]);
  });

  /** The pids of processes in the cgroups of containers `ids` (`libpod-<id>`): what runs of them, listed or not. */
  const processesOf = (ids: readonly string[]) =>
    readdirSync('/proc')
      .filter((pid) => /^\d+$/.test(pid))
      .filter((pid) => {
        try {
          const cgroup = readFileSync(`/proc/${pid}/cgroup`, 'latin1');
          return ids.some((id) => cgroup.includes(`libpod-${id}`) || cgroup.includes(`libpod-conmon-${id}`));
        } catch {
          return false;
        }
      });

  for (const signal of ['SIGSTOP', 'SIGKILL'] as const) {
    // rx~lost-container-sweep~1, rx~podman-service-fallback~1
    it(`the service ${signal === 'SIGSTOP' ? 'stopped' : 'killed'} (${signal}) 0.7 s into 20 deletes, three times: each workload is Removed only with no process of its container left, and no conmon outside Podman`, async function () {
      this.timeout(240_000);
      const { agent, service, pid } = servedAgent(`del${signal.slice(3).toLowerCase()}`);
      for (let run = 0; run < 3; run++) {
        await until(() => service.socket !== undefined && pid() !== undefined && alive(pid()!), 'a service up', 30_000);
        const serving = pid()!;
        pids.push(serving);
        const burst = Array.from({ length: 20 }, (_, i) => busybox(`r${run}w${i}`, agent.agentName));
        agent.send({ kind: run === 0 ? 'serverHello' : 'updateWorkload', added: burst, deleted: [] });
        for (const w of burst) await agent.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/, 60_000);
        const ids = podman('ps', '--all', '--no-trunc', '--format', '{{.ID}}', `--filter=label=agent=${agent.agentName}`).split('\n').filter(Boolean);
        expect(ids, 'the containers of the burst').to.have.length(20);
        agent.send({ kind: 'updateWorkload', added: [], deleted: burst.map((w) => ({ instanceName: w.instanceName, dependencies: {} })) });
        await new Promise((resolve) => setTimeout(resolve, 700));
        process.kill(serving, signal);
        for (const w of burst) await agent.waitFor(w.instanceName.workloadName, /^Removed$/, 90_000);
        expect(processesOf(ids), `run ${run}: processes of Removed workloads`).to.deep.equal([]);
        expect(unmanaged(agent.agentName), `run ${run}: conmons outside Podman`).to.deep.equal([]);
        expect(containersOf(agent.agentName), `run ${run}: containers`).to.deep.equal([]);
        await until(() => !alive(serving) || pid() !== serving, 'the stalled service replaced', 30_000);
      }
    });
  }

  // rx~podman-service-fallback~1
  it('a stalled service (SIGSTOP) is found out by its ping, killed and replaced; the create goes to the local CLI meanwhile', async () => {
    const { agent, service, calls, pid } = servedAgent('stalled');
    await until(() => service.socket !== undefined, 'the service is up');
    const stalled = pid()!;
    pids.push(stalled);
    process.kill(stalled, 'SIGSTOP');
    const w = busybox('late', agent.agentName);
    agent.send({ kind: 'serverHello', added: [w] });
    // The probe asks every 2 s; the CLI's deadline (120 s) is never waited for.
    await agent.waitFor('late', /^Running\(Ok\)$/, 20_000);
    await until(() => !alive(stalled), 'the stalled service is killed');
    expect(calls.some((c) => c.via?.startsWith('CLI (the service was lost'))).to.equal(true);
    expect(containersOf(agent.agentName)).to.deep.equal([`late.${w.instanceName.id}.${agent.agentName} running`]);
  });

  /**
   * A proxy on `socket` in front of a real service on `upstream` that passes its pings whole and cuts every other
   * answer after its headers and a byte of its body (the connection closed): a service that looks up and answers nothing.
   */
  const cuttingProxy = (socket: string, upstream: string) => {
    let cut = 0;
    const server = net.createServer((client) => {
      const engine = net.connect(upstream);
      let asked = '';
      let head = Buffer.alloc(0);
      client.on('data', (chunk: Buffer) => {
        asked = /^[A-Z]+ (\S+) HTTP/m.exec(chunk.toString('latin1'))?.[1] ?? asked;
        head = Buffer.alloc(0);
        engine.write(chunk);
      });
      engine.on('data', (chunk: Buffer) => {
        if (asked.endsWith('/_ping')) return void client.write(chunk);
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        cut += 1;
        client.end(head.subarray(0, end + 5));
        engine.destroy();
      });
      const close = () => {
        client.destroy();
        engine.destroy();
      };
      client.on('error', close).on('close', close);
      engine.on('error', close).on('close', close);
    });
    return { server, cut: () => cut, listening: new Promise<void>((resolve) => server.listen(socket, resolve)) };
  };

  // rx~podman-service-fallback~1
  it('a service whose answers are cut after their headers while its pings pass: creates, polls and deletes go on by the CLI', async () => {
    const folder = specFolder('ank-cut-');
    folders.push(folder);
    const upstream = path.join(folder, 'real.sock');
    const real = spawn('podman', ['system', 'service', '--time=0', `unix://${upstream}`], { stdio: 'ignore' });
    pids.push(real.pid!);
    await until(() => existsSync(upstream), 'the real service listens');
    const proxy = cuttingProxy(path.join(folder, 'cut.sock'), upstream);
    await proxy.listening;
    try {
      const { agent, service, calls } = servedAgent('cut', path.join(folder, 'cut.sock'));
      await until(() => service.socket === path.join(folder, 'cut.sock'), 'the cutting proxy taken for the service');
      // More workloads than the REST requests that run at once (8): cut answers never hold a slot.
      const workloads = Array.from({ length: 10 }, (_, i) => busybox(`w${i}`, agent.agentName));
      agent.send({ kind: 'serverHello', added: workloads });
      for (const w of workloads) await agent.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/, 60_000);
      expect(proxy.cut(), 'answers cut').to.be.greaterThan(0);
      expect(calls.some((c) => c.subcommand === 'ps' && c.via === 'CLI (the service was lost)')).to.equal(true);
      agent.send({ kind: 'updateWorkload', added: [], deleted: workloads.map((w) => ({ instanceName: w.instanceName, dependencies: {} })) });
      for (const w of workloads) await agent.waitFor(w.instanceName.workloadName, /^Removed$/, 60_000);
      expect(containersOf(agent.agentName)).to.deep.equal([]);
      // The service behind the proxy went on with the removes whose answers were cut, as the CLI made them again.
      expect(unmanaged(agent.agentName), 'conmons of Removed workloads').to.deep.equal([]);
      // Each remove that came back was made by the CLI: at once while the service was down, or after its answer was cut.
      const removes = calls.filter((c) => c.subcommand === 'rm' && c.outcome === 'ok');
      expect(removes.length).to.be.at.least(workloads.length);
      expect(
        removes.filter((c) => !c.via?.startsWith('CLI (')),
        'removes that came back by REST',
      ).to.deep.equal([]);
    } finally {
      proxy.server.close();
    }
  });

  // rx~podman-service-fallback~1
  it("a socket that answers but is not Podman's is not taken for the system's service: the agent starts its own", async () => {
    const folder = specFolder('ank-notpodman-');
    folders.push(folder);
    const socket = path.join(folder, 'fake.sock');
    const server = net.createServer((c) => c.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK'));
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      const { service, notes, up } = servedAgent('notpodman', socket);
      await up();
      expect(service.socket).to.not.equal(socket);
      expect(notes.at(-1)).to.match(/^service up: a service of its own/);
    } finally {
      server.close();
    }
  });

  // rx~podman-service~1
  it('health checks stay with the local CLI (the service would keep every exec session), and the figures of a scrape come by REST', async () => {
    const { agent, service, calls, up } = servedAgent('health');
    await up();
    const w = sleeping('checked', agent.agentName, ['--health-cmd', 'true', '--health-interval', '1s']);
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('checked', /^Running\(Ok\)$/);
    await until(() => calls.some((c) => c.subcommand === 'exec'), 'a health check ran');
    expect(calls.filter((c) => c.subcommand === 'exec').map((c) => c.via)).to.include('CLI (the service keeps every exec session)');
    expect(podman('inspect', '--format={{len .ExecIDs}}', `checked.${w.instanceName.id}.${agent.agentName}`), 'exec sessions kept').to.equal('0');
    const scraped: Call[] = [];
    const scraper = harnessPodman(service, { observe: ({ subcommand, via }) => scraped.push({ subcommand, via }) });
    const figures = await lastValueFrom(podmanFigures(scraper, agent.agentName, () => undefined));
    expect(figures.find((f) => f.workload === 'checked')?.PIDs).to.be.greaterThan(0);
    expect(scraped.map((c) => `${c.subcommand} ${c.via}`).sort()).to.deep.equal(['ps service (REST)', 'stats service (REST)']);
  });

  // rx~podman-service-fallback~1
  it('a Podman whose service cannot start leaves every call to the local CLI, and is tried again after 1 s, then after 2 s', async () => {
    const folder = specFolder('ank-noservice-');
    folders.push(folder);
    const notes: string[] = [];
    const service = new PodmanService({
      cli: harnessCli('/bin/false'),
      folder,
      systemSocket: path.join(folder, 'none.sock'),
      log: silentLogger,
      note: (n) => notes.push(n),
    });
    expect(service.plan(['ps'])).to.deep.equal({ via: 'cli', why: 'the service is not started yet' });
    await until(() => notes.length === 1, 'the first start to fail');
    expect(notes).to.deep.equal(['service down: it ended (exit code 1)']);
    expect(service.plan(['rm', '--force', 'x'])).to.deep.equal({ via: 'cli', why: 'the service is down: it ended (exit code 1)' });
    const failedAt = Date.now();
    await until(() => {
      service.plan(['ps']);
      return notes.length === 2;
    }, 'the second start to fail');
    // Each wait is the retry's delay and the failing Podman's own run (up to ~0.8 s on a loaded host).
    expect(Date.now() - failedAt, 'the first wait').to.be.within(900, 1800);
    const again = Date.now();
    await until(() => {
      service.plan(['ps']);
      return notes.length === 3;
    }, 'the third start to fail');
    expect(Date.now() - again, 'the second wait, doubled').to.be.within(1900, 2900);
  });

  // rx~podman-service-fallback~1
  it('with the switch off (podman_service = false) the runtime starts no service and every call is a Podman process of its own', async () => {
    const folder = specFolder('ank-switch-');
    folders.push(folder);
    // How each Podman call went: no way (undefined) is a process of its own; a route would say the service or why not.
    const ways: Array<string | undefined> = [];
    const made = makeRuntimes(silentLogger, {
      processes: harnessProcesses(),
      settings: moduleSettings('podman_service = false'),
      folder,
      observeCall: (call) => call.cli === 'podman' && ways.push(call.via),
    });
    const agentName = uniqueAgent('off');
    try {
      await lastValueFrom(made.connectors.get('podman')!.createWorkload(busybox('plain', agentName), {}));
      expect(ways.length, 'Podman processes for the create').to.be.greaterThan(0);
      expect(new Set(ways), 'the ways the calls took').to.deep.equal(new Set([undefined]));
      expect(existsSync(path.join(folder, 'podman.sock')), "the agent's own service socket").to.equal(false);
      const services = execFileSync('sh', ['-c', `pgrep -fc "[s]ystem service.*${folder}" || true`], { encoding: 'utf8' }).trim();
      expect(services, 'services started for the folder').to.equal('0');
    } finally {
      made.dispose();
      cleanup(agentName);
    }
  });
});
