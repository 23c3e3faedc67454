// Health checks of podman workloads on real Podman (this agent's own requirements; README "Beyond the released agent").
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { expect } from 'chai';
import { instanceKey } from '../../lib/workload.js';
import type { RestartPolicy, WorkloadSpec } from '../../lib/workload.js';
import { IMAGE, PodmanAgent, busybox, kubePod, podman, requirePodman, spec, uniqueAgent } from '../../scripts/harness/podman.js';
import { harnessCli } from '../../scripts/harness/processes.js';
import { until } from '../../scripts/harness/wait.js';

/**
 * A workload that is healthy while /tmp/ok exists in it, checked every second; failures in its start period
 * do not count, after it one failure makes it unhealthy.
 */
const checked = (name: string, agentName: string, restartPolicy: RestartPolicy = 'Never', startPeriod = '60s'): WorkloadSpec =>
  spec(
    name,
    agentName,
    'podman',
    `image: ${IMAGE}\ncommandOptions: ["--stop-timeout", "1", "--health-cmd", "cat /tmp/ok", "--health-interval", "1s", "--health-retries", "1", "--health-start-period", "${startPeriod}"]\ncommandArgs: ["/bin/sh", "-c", "sleep 3600"]\n`,
    { restartPolicy },
  );
const inContainer = (w: WorkloadSpec, ...command: string[]) => execFileSync('podman', ['exec', instanceKey(w.instanceName), ...command], { stdio: 'ignore' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The host's processes that carry the mark of a health check the agent runs. */
const markedProcesses = () =>
  readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'latin1').includes('ANKAGENT_HEALTH_CHECK=');
      } catch {
        return false;
      }
    });
const WAITING = "Pending(Starting): Waiting for its health check to pass ('cat /tmp/ok').";
const UNHEALTHY = "Failed(ExecFailed): Health check 'cat /tmp/ok' failed: cat: can't open '/tmp/ok': No such file or directory";

describe('health checks (real Podman, no systemd: the agent runs the checks)', function () {
  this.timeout(90_000);
  before(requirePodman);
  let agent: PodmanAgent;
  afterEach(() => agent.stop());
  /** Runs `db`, which waits for its check, and makes it healthy. */
  const runHealthy = async (db: WorkloadSpec) => {
    agent.send({ kind: 'serverHello', added: [db] });
    await agent.waitFor('db', /^Pending\(Starting\): Waiting/);
    inContainer(db, 'touch', '/tmp/ok');
    await agent.waitFor('db', /^Running\(Ok\)$/, 5000);
  };
  /** Once its start period (2 s) is over, failures count: makes `db`'s check fail. */
  const breakAfterStartPeriod = async (db: WorkloadSpec) => {
    await sleep(2500);
    inContainer(db, 'rm', '/tmp/ok');
  };

  // rx~health-runs-checks-on-interval~1, rx~health-starting-until-healthy~1, rx~health-running-when-healthy~1
  it('a workload is Running(Ok) only once its check passes, and its ADD_COND_RUNNING dependent waits for that', async () => {
    agent = new PodmanAgent(uniqueAgent('health'));
    const db = checked('db', agent.agentName);
    const app = busybox('app', agent.agentName, { dependencies: { db: 'Running' } });
    agent.send({ kind: 'serverHello', added: [db, app] });
    await agent.waitFor('db', /^Pending\(Starting\): Waiting for its health check/);
    // That no check passes before one does is the health stream's rule, in virtual time (spec/lib/health-stream.spec.ts).
    expect(agent.history('db')).to.deep.equal(['Pending(Starting): Triggered at runtime.', WAITING]);
    expect(agent.history('app')).to.deep.equal(['Pending(WaitingToStart)']);
    inContainer(db, 'touch', '/tmp/ok');
    await agent.waitFor('db', /^Running\(Ok\)$/, 5000);
    await agent.waitFor('app', /^Running\(Ok\)$/);
  });

  // rx~health-unhealthy-fails-and-stops~1
  it('unhealthy: Failed(ExecFailed) with the check output, the container stopped; ALWAYS starts it again, waiting for its check', async () => {
    agent = new PodmanAgent(uniqueAgent('health'));
    const db = checked('db', agent.agentName, 'Always', '2s');
    await runHealthy(db);
    const healthy = agent.history('db').length;
    await breakAfterStartPeriod(db);
    await agent.waitFor('db', /^Failed\(ExecFailed\): Health check/, 5000);
    await agent.waitFor('db', /^Removed$/, 20_000);
    const after = agent.history('db').slice(healthy);
    expect(after[0]).to.equal(UNHEALTHY);
    // The restart by ALWAYS: the new container waits for its own check again.
    for (let waited = 0; agent.history('db').slice(healthy).at(-1) !== WAITING && waited < 20_000; waited += 250) await sleep(250);
    expect(agent.history('db').slice(healthy)).to.deep.equal([
      UNHEALTHY,
      'Stopping(RequestedAtRuntime)',
      'Removed',
      'Pending(Starting): Triggered at runtime.',
      WAITING,
    ]);
  });

  // rx~health-unhealthy-fails-and-stops~1
  it('NEVER: the unhealthy container is stopped and stays Failed with the check output', async () => {
    agent = new PodmanAgent(uniqueAgent('health'));
    const db = checked('db', agent.agentName, 'Never', '2s');
    await runHealthy(db);
    await breakAfterStartPeriod(db);
    await agent.waitFor('db', /^Failed\(ExecFailed\): Health check/, 5000);
    const stopped = () => execFileSync('podman', ['inspect', '--format', '{{.State.Status}}', instanceKey(db.instanceName)], { encoding: 'utf8' }).trim();
    for (let waited = 0; stopped() !== 'exited' && waited < 15_000; waited += 250) await sleep(250);
    expect(stopped()).to.equal('exited');
    // Its exit changes nothing of what is reported (spec/lib/health-stream.spec.ts has the rule in virtual time).
    expect(agent.history('db').at(-1)).to.equal(UNHEALTHY);
  });

  // rx~health-switch-off~1
  it('with health_checks = false the released behaviour: states from the container alone, the checks left to Podman', async () => {
    agent = new PodmanAgent(uniqueAgent('nohealth'), undefined, harnessCli('podman'), { health: false });
    const db = checked('db', agent.agentName);
    agent.send({ kind: 'serverHello', added: [db] });
    await agent.waitFor('db', /^Running\(Ok\)$/);
    await sleep(2500);
    expect(agent.history('db')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
    const interval = execFileSync('podman', ['inspect', '--format', '{{.Config.Healthcheck.Interval}}', instanceKey(db.instanceName)], {
      encoding: 'utf8',
    }).trim();
    expect(interval, 'the interval as the workload gave it').to.equal('1s');
  });

  describe('checks that hang, flood or carry values Podman reads differently', () => {
    /** A workload checked by `cmd` with the given health flags (timer every second unless given). */
    const withCheck = (agentName: string, cmd: string, ...flags: string[]) =>
      spec(
        'db',
        agentName,
        'podman',
        `image: ${IMAGE}\ncommandOptions: ${JSON.stringify(['--stop-timeout', '1', '--health-cmd', cmd, ...flags])}\ncommandArgs: ["/bin/sh", "-c", "sleep 3601"]\n`,
      );
    /** The processes in the workload's container that a check started (`sleep 3600` is the check's, `sleep 3601` the workload's own). */
    const checkProcesses = (w: WorkloadSpec) =>
      execFileSync('podman', ['top', instanceKey(w.instanceName), 'args'], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.trim() === 'sleep 3600');

    // rx~health-unhealthy-fails-and-stops~1
    it('a check that outlives its timeout has failed: retries of them make the workload Failed, and nothing of them stays running', async () => {
      agent = new PodmanAgent(uniqueAgent('hang'));
      const db = withCheck(agent.agentName, 'sleep 3600 & sleep 3600', '--health-timeout', '1s', '--health-retries', '3', '--health-interval', '1s');
      agent.send({ kind: 'serverHello', added: [db] });
      await agent.waitFor('db', /^Pending\(Starting\): Waiting/);
      // Checks start at 1 s and 2 s; each is killed (with the sleep it forked) at its timeout.
      await sleep(3700);
      expect(checkProcesses(db).length, 'the two sleeps of at most the one check under way').to.be.at.most(2);
      await agent.waitFor('db', /^Failed\(ExecFailed\): Health check/, 10_000);
      expect(agent.history('db').at(-1)).to.equal(
        "Failed(ExecFailed): Health check 'sleep 3600 & sleep 3600' failed: The check did not finish within its timeout of 1 s.",
      );
    });

    // rx~health-unhealthy-fails-and-stops~1
    it('a check whose output never ends is cut at its timeout and fails; the agent keeps only the start of what it wrote', async () => {
      agent = new PodmanAgent(uniqueAgent('flood'));
      const db = withCheck(agent.agentName, 'yes', '--health-timeout', '1s', '--health-retries', '1', '--health-interval', '1s');
      agent.send({ kind: 'serverHello', added: [db] });
      await agent.waitFor('db', /^Failed\(ExecFailed\): Health check 'yes' failed: The check did not finish within its timeout of 1 s\.$/, 15_000);
    });

    // rx~health-runs-checks-on-interval~1
    it('an interval of 600h is kept to a day: no check runs at once, the workload waits for the first', async () => {
      agent = new PodmanAgent(uniqueAgent('longinterval'));
      const db = withCheck(agent.agentName, 'true', '--health-interval', '600h');
      agent.send({ kind: 'serverHello', added: [db] });
      await agent.waitFor('db', /^Pending\(Starting\): Waiting/);
      const calls = agent.cli.calls;
      await sleep(2500);
      expect(agent.history('db')).to.deep.equal([
        'Pending(Starting): Triggered at runtime.',
        "Pending(Starting): Waiting for its health check to pass ('true').",
      ]);
      expect(agent.cli.calls - calls, 'podman calls while it waits').to.be.at.most(1);
    });

    // rx~health-runs-checks-on-interval~1, rx~health-running-when-healthy~1
    it('a timeout of 600h lets a passing check pass, and an interval of .5s (Go grammar) runs every half second', async () => {
      // Each check is a podman exec of its own: when each started and ended is noted. An exec can take longer
      // than the interval on a loaded host, so the schedule is read from both ends: never two checks within an
      // interval, and the next one at the first tick after one ended.
      const checks: { start: number; end: number }[] = [];
      const cli = harnessCli('podman', {
        observe: ({ subcommand, seconds }) => {
          const end = performance.now();
          if (subcommand === 'exec') checks.push({ start: end - seconds * 1000, end });
        },
      });
      agent = new PodmanAgent(uniqueAgent('grammar'), undefined, cli);
      // 600 h is past a Node timer's range (24.8 days): a timer set to it as it is would fire at once and fail the check.
      const db = withCheck(agent.agentName, 'true', '--health-timeout', '600h', '--health-interval', '.5s');
      agent.send({ kind: 'serverHello', added: [db] });
      await agent.waitFor('db', /^Running\(Ok\)$/, 5000);
      const from = checks.length;
      await until(() => checks.length >= from + 5, 'five more checks in 10 s (none at the default interval of 30 s)', 10_000);
      const seen = checks.slice(from, from + 5);
      expect(seen, 'checks within 10 s').to.have.length(5);
      const pairs = seen.slice(1).map((next, i) => ({ sinceStart: next.start - seen[i].start, idle: next.start - seen[i].end }));
      expect(Math.min(...pairs.map((p) => p.sinceStart)), 'the shortest time between two checks, in ms').to.be.at.least(400);
      const idles = pairs.map((p) => p.idle).sort((x, y) => x - y);
      expect(idles[Math.floor(idles.length / 2)], "the median time from a check's end to the next one, in ms").to.be.at.most(600);
    });

    // rx~health-runs-checks-on-interval~1
    it('a health flag Podman would refuse fails the workload with Pending(StartingFailed) naming the flag, without retries', async () => {
      agent = new PodmanAgent(uniqueAgent('badflag'));
      const db = withCheck(agent.agentName, 'true', '--health-interval', '5x');
      agent.send({ kind: 'serverHello', added: [db] });
      await agent.waitFor('db', /^Pending\(StartingFailed\)/);
      expect(agent.history('db').at(-1)).to.equal(
        "Pending(StartingFailed): The health check option --health-interval '5x' is not a duration (such as 30s, 1m30s or .5s).",
      );
      expect(podman('ps', '--all', '--quiet', `--filter=label=agent=${agent.agentName}`)).to.equal('');
    });

    // rx~health-unhealthy-fails-and-stops~1
    it('a workload deleted while its check hangs is removed at once, and the check goes with it', async () => {
      agent = new PodmanAgent(uniqueAgent('delhang'));
      const db = withCheck(agent.agentName, 'sleep 3600', '--health-timeout', '60s', '--health-interval', '1s', '--stop-timeout', '0');
      agent.send({ kind: 'serverHello', added: [db] });
      await agent.waitFor('db', /^Pending\(Starting\): Waiting/);
      for (let waited = 0; checkProcesses(db).length === 0 && waited < 10_000; waited += 100) await sleep(100);
      expect(checkProcesses(db).length, 'the check is under way').to.equal(1);
      expect(markedProcesses().length, 'the check carries its mark').to.be.at.least(1);
      agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: db.instanceName, dependencies: {} }] });
      await agent.waitFor('db', /^Removed$/, 10_000);
      await sleep(200);
      expect(markedProcesses(), "processes of the agent's checks").to.deep.equal([]);
    });
  });

  describe('podman-kube: the livenessProbe Podman maps to a health check', () => {
    /** A pod whose container `app` is live while /tmp/ok exists in it (failures count after `delay` s); a readinessProbe Podman does not map. */
    const probed = (agentName: string, delay = 60) => {
      const pod = `${agentName}-probed`.replace(/_/g, '-');
      const probes = `    livenessProbe:
      exec:
        command: ["cat", "/tmp/ok"]
      initialDelaySeconds: ${delay}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec:
        command: ["cat", "/tmp/ready"]
`;
      return { w: kubePod('db', agentName, pod, [{ name: 'app', more: probes }, { name: 'sidecar' }]), app: `${pod}-app` };
    };
    const inApp = (container: string, ...command: string[]) => execFileSync('podman', ['exec', container, ...command], { stdio: 'ignore' });
    const KUBE_WAITING = /^Pending\(Starting\): Waiting for its health check to pass \('[^']*-probed-app: cat \/tmp\/ok \|\| exit 1'\)\.$/;

    // rx~health-kube-liveness-probes~1, rx~health-starting-until-healthy~1, rx~health-running-when-healthy~1
    it('the pod is Running(Ok) only once its probed container is healthy, and its ADD_COND_RUNNING dependent waits for that', async () => {
      agent = new PodmanAgent(uniqueAgent('kubehealth'));
      const { w, app } = probed(agent.agentName);
      const dependent = busybox('app', agent.agentName, { dependencies: { db: 'Running' } });
      agent.send({ kind: 'serverHello', added: [w, dependent] });
      await agent.waitFor('db', KUBE_WAITING, 30_000);
      expect(agent.history('app')).to.deep.equal(['Pending(WaitingToStart)']);
      inApp(app, 'touch', '/tmp/ok');
      await agent.waitFor('db', /^Running\(Ok\)$/, 5000);
      await agent.waitFor('app', /^Running\(Ok\)$/);
    });

    // rx~health-kube-liveness-probes~1, rx~health-unhealthy-fails-and-stops~1
    it('unhealthy: Failed(ExecFailed) naming the container and its check output, that container stopped', async () => {
      agent = new PodmanAgent(uniqueAgent('kubehealth'));
      const { w, app } = probed(agent.agentName, 2);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('db', KUBE_WAITING, 30_000);
      inApp(app, 'touch', '/tmp/ok');
      await agent.waitFor('db', /^Running\(Ok\)$/, 5000);
      await sleep(2500);
      inApp(app, 'rm', '/tmp/ok');
      await agent.waitFor(
        'db',
        /^Failed\(ExecFailed\): Health check '[^']*-probed-app: cat \/tmp\/ok \|\| exit 1' failed: [^ ]*-probed-app: cat: can't open '\/tmp\/ok'/,
        5000,
      );
      const status = () => execFileSync('podman', ['inspect', '--format', '{{.State.Status}}', app], { encoding: 'utf8' }).trim();
      for (let waited = 0; status() !== 'exited' && waited < 15_000; waited += 250) await sleep(250);
      expect(status()).to.equal('exited');
    });

    // rx~health-kube-liveness-probes~1, rx~health-unhealthy-fails-and-stops~1
    it('a livenessProbe that outlives its timeoutSeconds has failed: failureThreshold of them fail the pod', async () => {
      agent = new PodmanAgent(uniqueAgent('kubehang'));
      const pod = `${agent.agentName}-hang`.replace(/_/g, '-');
      const probe = `    livenessProbe:
      exec:
        command: ["sleep", "3600"]
      periodSeconds: 1
      timeoutSeconds: 1
      failureThreshold: 2
`;
      agent.send({ kind: 'serverHello', added: [kubePod('db', agent.agentName, pod, [{ name: 'app', more: probe }])] });
      await agent.waitFor('db', /^Failed\(ExecFailed\): Health check/, 30_000);
      expect(agent.history('db').at(-1)).to.match(/failed: [^ ]*-hang-app: The check did not finish within its timeout of 1 s\.$/);
    });

    // rx~health-kube-liveness-probes~1
    it("on a host whose systemd runs Podman's timers, the agent runs no check itself and follows the status they leave", async () => {
      agent = new PodmanAgent(uniqueAgent('kubetimers'), undefined, harnessCli('podman'), { podmanTimers: true });
      const { w, app } = probed(agent.agentName);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('db', KUBE_WAITING, 30_000);
      inApp(app, 'touch', '/tmp/ok');
      // A check would pass now; none runs (this host has no systemd), and the agent runs none either.
      await sleep(3000);
      expect(agent.history('db').at(-1)).to.match(KUBE_WAITING);
      // What Podman's timer would do: one check.
      execFileSync('podman', ['healthcheck', 'run', app], { stdio: 'ignore' });
      await agent.waitFor('db', /^Running\(Ok\)$/, 5000);
    });

    // rx~health-switch-off~1
    it('with health_checks = false the released behaviour: the pod is Running(Ok) as its containers run', async () => {
      agent = new PodmanAgent(uniqueAgent('kubenohealth'), undefined, harnessCli('podman'), { health: false });
      const { w } = probed(agent.agentName);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('db', /^Running\(Ok\)$/, 30_000);
      expect(agent.history('db')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
    });
  });
});
