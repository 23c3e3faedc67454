// The systemd runtime on real systemd (PID 1 of a Podman container; the agent's systemctl, journalctl and bus
// bridge reach it through wrappers), driven by the workload core.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import { filter, lastValueFrom, take, toArray } from 'rxjs';
import { builtInRuntimes } from '../../bin/wiring.js';
import { silentLogger } from '../../lib/logger.js';
import { ConfigurationError } from '../../lib/runtime-connector.js';
import type { Cli } from '../../lib/runtimes/base/cli.js';
import { systemdModule } from '../../lib/runtimes/systemd/index.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { PodmanAgent, busybox, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { SystemdHost, requireSystemd } from '../../scripts/harness/systemd.js';
import { until } from '../../scripts/harness/wait.js';
import { harnessProcesses } from '../../scripts/harness/processes.js';
import { specFolder } from '../../scripts/harness/temp.js';

const SLEEPER = 'ExecStart=/bin/sleep 3600';

/** A systemd workload managing `unit`. */
const unitWorkload = (name: string, agentName: string, unit: string, more = '', o: Parameters<typeof spec>[4] = {}): WorkloadSpec =>
  spec(name, agentName, 'systemd', `serviceName: ${unit}\n${more}`, o);

describe('the systemd runtime (real systemd in a container)', function () {
  this.timeout(90_000);
  let host: SystemdHost;
  let agent: PodmanAgent;
  let clis: Record<string, Cli>;
  let folder: string;
  const start = (name = uniqueAgent('sd'), events = true) => new PodmanAgent(name, undefined, undefined, { clis, folder, events, verifyMs: 500 });
  /** The specs' units; each test has a systemd of its own, so that none finds what another left (a unit's jobs,
   * a journal follower, a bus bridge). */
  const UNITS = {
    'sleeper.service': SLEEPER,
    'oneshot.service': 'Type=oneshot\nExecStart=/bin/sh -c "echo line one; echo line two; exit 0"',
    'false.service': 'ExecStart=/bin/false',
    // A unit's last command is exec'd: see SystemdHost (one process a unit).
    'talker.service': 'ExecStart=/bin/sh -c "echo hello from the unit; exec sleep 3600"',
  };
  before(() => {
    requirePodman();
    requireSystemd();
  });
  beforeEach(async function () {
    this.timeout(120_000);
    host = await SystemdHost.start();
    host.install(UNITS);
    shows = [];
    clis = host.clis(({ subcommand }) => subcommand === 'show' && shows.push(clis['systemd-stdio-bridge'].calls));
    folder = specFolder('ank-systemd-');
    agent = start();
  });
  afterEach(() => {
    agent?.stop();
    host?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  const calls = () => clis.systemctl.calls;
  /** The `systemctl show` calls of the agent, each as how many bus bridges had been opened when it ran. */
  let shows: number[] = [];

  // rx~systemd-runtime~1, rx~systemd-states~1
  it('desiredState running starts the unit: Pending(Starting), then Running(Ok) as systemd says; a delete stops it and it stays installed', async () => {
    const w = unitWorkload('web', agent.agentName, 'sleeper.service');
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('web', /^Running\(Ok\)$/);
    expect(host.property('sleeper.service', 'ActiveState')).to.equal('active');
    agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: w.instanceName, dependencies: {} }] });
    await agent.waitFor('web', /^Removed$/);
    expect(host.property('sleeper.service', 'ActiveState')).to.equal('inactive');
    expect(host.property('sleeper.service', 'LoadState')).to.equal('loaded');
    expect(agent.history('web')[0]).to.equal('Pending(Starting): Triggered at runtime.');
  });

  // rx~systemd-runtime~1
  it('a unit that ran before the workload took it over is left running at delete: the agent stops only what it started', async () => {
    host.exec('systemctl', 'start', 'sleeper.service');
    const pid = host.property('sleeper.service', 'MainPID');
    const found = unitWorkload('found', agent.agentName, 'sleeper.service');
    const journal = unitWorkload('journal', agent.agentName, 'systemd-journald.service');
    agent.send({ kind: 'serverHello', added: [found, journal] });
    await agent.waitFor('found', /^Running\(Ok\)$/);
    await agent.waitFor('journal', /^Running\(Ok\)$/);
    const deleted = [found, journal].map((w) => ({ instanceName: w.instanceName, dependencies: {} }));
    agent.send({ kind: 'updateWorkload', added: [], deleted });
    await agent.waitFor('found', /^Removed$/);
    await agent.waitFor('journal', /^Removed$/);
    expect(host.property('sleeper.service', 'MainPID'), 'the same process runs on').to.equal(pid);
    expect(host.property('systemd-journald.service', 'ActiveState')).to.equal('active');
  });

  // rx~systemd-runtime~1, rx~systemd-states~1
  it('desiredState stopped stops a running unit: Succeeded(Ok) once it is inactive', async () => {
    host.exec('systemctl', 'start', 'sleeper.service');
    agent.send({ kind: 'serverHello', added: [unitWorkload('off', agent.agentName, 'sleeper.service', 'desiredState: stopped')] });
    await agent.waitFor('off', /^Succeeded\(Ok\)$/);
    expect(host.property('sleeper.service', 'ActiveState')).to.equal('inactive');
  });

  // rx~systemd-runtime~1, rx~systemd-restart-rule~1
  it('desiredState restarted restarts the unit (a new main process), but not one that became active in the last 3 s', async () => {
    host.exec('systemctl', 'start', 'sleeper.service');
    const fresh = host.property('sleeper.service', 'MainPID');
    agent.send({ kind: 'serverHello', added: [unitWorkload('again', agent.agentName, 'sleeper.service', 'desiredState: restarted')] });
    await agent.waitFor('again', /^Running\(Ok\)$/);
    expect(host.property('sleeper.service', 'MainPID'), 'started 3 s ago at most: left as it is').to.equal(fresh);
    agent.stop();
    await new Promise((r) => setTimeout(r, 3100));
    agent = start();
    agent.send({ kind: 'serverHello', added: [unitWorkload('again', agent.agentName, 'sleeper.service', 'desiredState: restarted')] });
    await agent.waitFor('again', /^Running\(Ok\)$/);
    expect(host.property('sleeper.service', 'MainPID')).to.not.equal(fresh);
  });

  // rx~systemd-states~1, rx~systemd-events~1
  it("a unit that fails (ExecStart=/bin/false) is Failed(ExecFailed) in systemd's words", async () => {
    agent.send({ kind: 'serverHello', added: [unitWorkload('broken', agent.agentName, 'false.service')] });
    await agent.waitFor('broken', /^Failed\(ExecFailed\): Service failed: failed$/);
  });

  // rx~systemd-events~1, swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
  it('a unit killed from outside is reported at once from systemd news, with no systemctl call; ON_FAILURE starts it again', async () => {
    agent.send({ kind: 'serverHello', added: [unitWorkload('victim', agent.agentName, 'sleeper.service', '', { restartPolicy: 'OnFailure' })] });
    await agent.waitFor('victim', /^Running\(Ok\)$/);
    // The bus is up once the first show ran; from now on nothing but its news tells the states.
    await new Promise((r) => setTimeout(r, 300));
    const before = calls();
    host.exec('systemctl', 'kill', '--signal=KILL', 'sleeper.service');
    await agent.waitFor('victim', /^Failed\(ExecFailed\): Service failed: failed$/, 5_000);
    expect(calls() - before, 'systemctl calls: only the kill, none to learn the state').to.equal(0);
    await until(() => agent.history('victim').filter((h) => h === 'Running(Ok)').length === 2, 'the unit to run again');
    expect(host.property('sleeper.service', 'ActiveState')).to.equal('active');
  });

  // rx~crash-loop-backoff~1, rx~systemd-runtime~1
  it('a unit that keeps failing is started again at once, then waits for the crash-loop back-off', async () => {
    agent.send({ kind: 'serverHello', added: [unitWorkload('flapping', agent.agentName, 'false.service', '', { restartPolicy: 'Always' })] });
    await agent.waitFor('flapping', /^Pending\(WaitingToStart\)/, 15_000);
    const failures = () => agent.history('flapping').filter((h) => h.startsWith('Failed(ExecFailed)')).length;
    expect(failures()).to.equal(2);
    await new Promise((r) => setTimeout(r, 3000));
    expect(failures(), 'no third start within the back-off').to.equal(2);
  });

  // rx~systemd-refusals~1
  it('a unit that does not exist is Pending(StartingFailed) naming it, without retries', async () => {
    agent.send({ kind: 'serverHello', added: [unitWorkload('ghost', agent.agentName, 'nothere.service')] });
    await agent.waitFor('ghost', /^Pending\(StartingFailed\)/);
    const [last] = agent.history('ghost').slice(-1);
    expect(last).to.match(/The unit 'nothere\.service' does not exist/);
    await new Promise((r) => setTimeout(r, 1500));
    expect(agent.history('ghost').filter((h) => /Retry/.test(h))).to.deep.equal([]);
  });

  // rx~systemd-refusals~1, rx~systemd-config~1
  it('a Control Interface or workload files are refused with Pending(StartingFailed), and so is a malformed config', async () => {
    const files = unitWorkload('withfiles', agent.agentName, 'sleeper.service', '', { files: [{ mountPoint: '/etc/x', data: 'x' }] });
    const options = unitWorkload('badflag', agent.agentName, 'sleeper.service', 'generalOptions: ["--root=/"]');
    const name = unitWorkload('badname', agent.agentName, 'sleeper');
    const ioAgent = new PodmanAgent(uniqueAgent('sdio'), specFolder('ank-systemd-io-'), undefined, { clis, folder });
    try {
      ioAgent.send({ kind: 'serverHello', added: [{ ...files, instanceName: { ...files.instanceName, agentName: ioAgent.agentName } }] });
      await ioAgent.waitFor('withfiles', /^Pending\(StartingFailed\): The systemd runtime takes no workload files/);
    } finally {
      ioAgent.stop();
    }
    // The Control Interface, as the agent's host side hands its folder to the runtime.
    // The systemd runtime alone: a Podman runtime beside it would start a Podman service that nothing stops.
    const systemd = builtInRuntimes(silentLogger, { clis, folder, processes: harnessProcesses(), modules: [systemdModule] }).get('systemd')!;
    const refused = await lastValueFrom(systemd.createWorkload(unitWorkload('ci', agent.agentName, 'sleeper.service'), { controlInterfacePath: folder })).catch(
      (e: Error) => e,
    );
    expect(refused).to.be.instanceOf(ConfigurationError);
    expect((refused as Error).message).to.equal('The systemd runtime has no Control Interface: a unit has nothing the agent could mount its pipes into.');
    agent.send({ kind: 'serverHello', added: [options, name] });
    await agent.waitFor('badflag', /^Pending\(StartingFailed\): The general option '--root=\/' is not one the systemd runtime takes/);
    await agent.waitFor('badname', /^Pending\(StartingFailed\): The service name 'sleeper' must be a unit name ending in a unit type/);
    expect(host.property('sleeper.service', 'ActiveState')).to.equal('inactive');
  });

  // rx~systemd-runtime~1
  it("logs are the unit's journal: its lines, tail and follow", async () => {
    const w = unitWorkload('chatty', agent.agentName, 'talker.service');
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('chatty', /^Running\(Ok\)$/);
    const journal = () => host.exec('journalctl', '-u', 'talker.service', '--output=cat').split('\n');
    await until(() => journal().includes('hello from the unit'), 'the unit to talk');
    const running = agent.running.find(w.instanceName);
    expect(running).to.not.equal(undefined);
    const { runtime: connector, id } = running!;
    // Its line and systemd's "Started" come in either order: the tail is the journal's last line, whichever.
    expect(await lastValueFrom(connector.logs(id, { follow: false, tail: 1 }).pipe(toArray()))).to.deep.equal(journal().slice(-1));
    expect(await lastValueFrom(connector.logs(id, { follow: false }).pipe(toArray()))).to.include('hello from the unit');
    host.exec('systemctl', 'start', 'oneshot.service');
    // journalctl -u: the unit's own lines, and what systemd says of it.
    const followed = await lastValueFrom(
      connector.logs({ ...(id as object), unit: 'oneshot.service' }, { follow: true }).pipe(
        filter((line) => line.startsWith('line')),
        take(2),
        toArray(),
      ),
    );
    expect(followed).to.deep.equal(['line one', 'line two']);
  });

  // swdd~agent-handles-new-workload-operations~1, rx~systemd-states~1
  it('a container workload waits for its unit to run (ADD_COND_RUNNING), and a unit for a container that succeeded', async () => {
    const unit = unitWorkload('db', agent.agentName, 'sleeper.service');
    const app = busybox('app', agent.agentName, { dependencies: { db: 'Running' } });
    const init = busybox('init', agent.agentName, { script: 'sleep 1; exit 0' });
    const late = unitWorkload('late', agent.agentName, 'talker.service', '', { dependencies: { init: 'Succeeded' } });
    agent.send({ kind: 'serverHello', added: [app, unit, late, init] });
    await agent.waitFor('app', /^Running\(Ok\)$/);
    await agent.waitFor('late', /^Running\(Ok\)$/);
    const order = agent.states.map((s) => `${s.instanceName.workloadName}:${s.executionState.state}`);
    expect(order.indexOf('db:Running')).to.be.below(order.indexOf('app:Running'));
    expect(order.indexOf('init:Succeeded')).to.be.below(order.indexOf('late:Running'));
  });

  // rx~systemd-resume~1, swdd~agent-existing-workloads-finds-list~1
  it('an agent started again finds its units as it left them: no start, no restart, the same state', async () => {
    const w = unitWorkload('kept', agent.agentName, 'sleeper.service', 'desiredState: restarted');
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('kept', /^Running\(Ok\)$/);
    await new Promise((r) => setTimeout(r, 3100));
    const pid = host.property('sleeper.service', 'MainPID');
    agent.end();
    agent = start(agent.agentName);
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('kept', /^Running\(Ok\)$/);
    expect(host.property('sleeper.service', 'MainPID'), 'resumed, not restarted').to.equal(pid);
    expect(agent.history('kept')).to.deep.equal(['Running(Ok)']);
    // Gone from the desired state while the agent was away: stopped.
    agent.end();
    agent = start(agent.agentName);
    agent.send({ kind: 'serverHello', added: [] });
    await until(() => host.property('sleeper.service', 'ActiveState') === 'inactive', 'the unit no workload asks for to be stopped');
  });

  // rx~systemd-events~1
  it('with the bus bridge gone, states come from polls and the bridge is opened again', async function () {
    // The bridge's next try after it was kept away may come tens of seconds later (its back-off doubles).
    this.timeout(120_000);
    const w = unitWorkload('polled', agent.agentName, 'sleeper.service');
    agent.send({ kind: 'serverHello', added: [w] });
    await agent.waitFor('polled', /^Running\(Ok\)$/);
    // The bridge killed and kept from coming back: only polls can tell what happens now.
    host.break('systemd-stdio-bridge');
    const gone = shows.length;
    host.exec('sh', '-c', 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = systemd-stdio-b ] && kill -9 "$(basename $p)"; done; true');
    // What the agent shows at once of a stream it lost is behind it before the unit is killed.
    await until(() => shows.length > gone, 'a show after the bridge went');
    const killed = shows.length;
    host.exec('systemctl', 'kill', '--signal=KILL', 'sleeper.service');
    await agent.waitFor('polled', /^Failed\(ExecFailed\)/, 5_000);
    expect(shows.length - killed, 'systemctl show calls (polls) after the unit was killed, the bridge gone').to.be.greaterThan(0);
    const bridges = clis['systemd-stdio-bridge'].calls;
    host.mend('systemd-stdio-bridge');
    await until(() => clis['systemd-stdio-bridge'].calls > bridges, 'the bridge to be opened again', 70_000);
  });
});
