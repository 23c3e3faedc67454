// The metrics endpoint of a running agent, with real Podman workloads, checked by Prometheus' own tools:
// promtool for the exposition, and a real Prometheus server scraping the agent and answering queries.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, lchownSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import { BIN } from '../../scripts/harness/agent.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { endToEnd } from '../helpers/end-to-end.js';
import { type AgentStream, addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { IMAGE, SLEEP_UNTIL_STOPPED, busybox, kubePod, podmanServicesIn, spec } from '../../scripts/harness/podman.js';
import { until } from '../../scripts/harness/wait.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** A free loopback port. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
/** The value of the series `name{labels}` in a scrape (labels as written, in any order). */
function seriesValue(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const has = Object.entries(labels).every(([k, v]) => (m[2] ?? '').split(',').includes(`${k}="${v}"`));
    if (has) return Number(m[3]);
  }
  return undefined;
}
const reached = (stream: AgentStream, workload: string, state: RegExp) => reportedStates(stream).some(([w, , s]) => w === workload && state.test(s));

describe('the metrics endpoint (--metrics), scraped by Prometheus', function () {
  this.timeout(180_000);
  const e2e = endToEnd('metrics');
  const { agentName } = e2e;
  let prometheus: ChildProcess | undefined;
  before(function () {
    this.timeout(600_000);
    if (process.getuid?.() !== 0 && !hasPromtool()) this.skip(); // Debian's prometheus package is installed here only as root
    if (!hasPromtool())
      execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null'], { stdio: 'inherit' });
  });
  afterEach(() => prometheus?.kill('SIGKILL'));

  it("counts a restart, an exit code, a denied request and the report times; shows containers' figures, a pod's as its workload's; promtool and a real Prometheus read it", async () => {
    const port = await freePort();
    e2e.start({ args: ['--metrics', `127.0.0.1:${port}`] });
    const stream = await e2e.server.nextStream();
    const flaky = busybox('flaky', agentName, { script: 'sleep 2; exit 3', restartPolicy: 'OnFailure' });
    const watcher = {
      ...busybox('watcher', agentName),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['desiredState'] }], denyRules: [] },
    };
    // A podman-kube workload of two containers (and the pod's infra container): its figures are its pod's.
    const pod = kubePod('pod', agentName, `${agentName}-pod`.replace(/_/g, '-'), [{ name: 'a' }, { name: 'b' }]);
    const checked = spec(
      'checked',
      agentName,
      'podman',
      `image: ${IMAGE}\ncommandOptions: ["--stop-timeout", "1", "--health-cmd", "true", "--health-interval", "1s"]\ncommandArgs: ["sleep", "3600"]\n`,
    );
    // A containerd workload: its figures come from nerdctl.
    const onContainerd = spec('ctrd', agentName, 'containerd', `image: ${IMAGE}\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(SLEEP_UNTIL_STOPPED)}]\n`);
    stream.send({
      FromServerEnum: {
        case: 'serverHello',
        value: { addedWorkloads: [flaky, watcher, pod, checked, onContainerd].map(addedWorkload) },
      },
    });
    await until(() => reached(stream, 'watcher', /^Running\(Ok\)$/), 'the watcher to run');
    const client = new ControlInterfaceClient(controlInterfaceFolder(path.join(e2e.run, `${agentName}_io`), watcher));
    try {
      client.hello();
      await client.next();
      client.askState('mine', 'desiredState');
      client.askState('not mine', 'agents');
      await client.next();
    } finally {
      client.close();
    }
    await until(() => reportedStates(stream).filter(([w, , s]) => w === 'flaky' && s === 'Running(Ok)').length >= 2, 'a restart of flaky', 30_000);

    const workload = (name: string) => ({ workload: name, agent: agentName });
    let text = '';
    await until(async () => {
      text = await scrape(port);
      return (
        (seriesValue(text, 'ank_agent_container_memory_bytes', workload('watcher')) ?? 0) > 0 &&
        seriesValue(text, 'ank_agent_container_pids', workload('pod')) !== undefined &&
        seriesValue(text, 'ank_agent_workload_healthy', workload('checked')) === 1 &&
        (seriesValue(text, 'ank_agent_container_memory_bytes', workload('ctrd')) ?? 0) > 0
      );
    }, 'the container figures');
    expect(seriesValue(text, 'ank_agent_container_pids', workload('ctrd')), "the containerd workload's shell and sleep").to.be.at.least(2);
    // Each of the pod's two containers runs a shell and a sleep.
    expect(seriesValue(text, 'ank_agent_container_pids', workload('pod')), "the pod's processes").to.be.at.least(4);
    expect(seriesValue(text, 'ank_agent_container_memory_bytes', workload('pod'))).to.be.greaterThan(0);
    expect(seriesValue(text, 'ank_agent_workload_restarts_total', workload('flaky'))).to.be.at.least(1);
    expect(seriesValue(text, 'ank_agent_workload_last_exit_code', workload('flaky'))).to.equal(3);
    expect(seriesValue(text, 'ank_agent_workload_state', { ...workload('watcher'), state: 'Running', substate: 'Ok' })).to.equal(1);
    expect(seriesValue(text, 'ank_agent_workload_healthy', workload('checked')), 'a health-checked workload whose check passed').to.equal(1);
    expect(seriesValue(text, 'ank_agent_workload_healthy', workload('watcher')), 'a workload without a check').to.equal(undefined);
    expect(seriesValue(text, 'ank_agent_control_interface_requests_total', { workload: 'watcher', decision: 'denied' })).to.equal(1);
    expect(seriesValue(text, 'ank_agent_control_interface_requests_total', { workload: 'watcher', decision: 'allowed' })).to.equal(1);
    expect(seriesValue(text, 'ank_agent_server_connected', {})).to.equal(1);
    expect(seriesValue(text, 'ank_agent_podman_calls_total', { subcommand: 'run', outcome: 'ok' })).to.be.at.least(2);
    // Reports of container changes (flaky: Running, Failed, Running at least), each timed from when the change was heard.
    expect(seriesValue(text, 'ank_agent_workload_state_report_seconds_count', workload('flaky'))).to.be.at.least(3);
    expect(seriesValue(text, 'ank_agent_workload_state_report_seconds_sum', workload('flaky'))).to.be.at.least(0);
    expect(seriesValue(text, 'ank_agent_podman_event_stream_restarts_total', {}), "Podman's event stream never ended").to.equal(0);
    expect(text, 'no instance ids in labels').not.to.match(new RegExp(watcher.instanceName.id));
    const check = spawnChecked('promtool', ['check', 'metrics'], text);
    expect(check, 'promtool check metrics').to.equal('');

    // A real Prometheus scraping the agent every second answers queries about the workloads.
    const promPort = await freePort();
    const dir = specFolder('ank-prometheus-');
    writeFileSync(
      path.join(dir, 'prometheus.yml'),
      `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ank-agent\n    static_configs:\n      - targets: ['127.0.0.1:${port}']\n`,
    );
    prometheus = spawn(
      'prometheus',
      [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`],
      { stdio: 'ignore' },
    );
    const query = async (q: string) => {
      try {
        const res = await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=${encodeURIComponent(q)}`);
        const body = (await res.json()) as { data?: { result?: Array<{ value: [number, string] }> } };
        return body.data?.result?.[0] ? Number(body.data.result[0].value[1]) : undefined;
      } catch {
        return undefined;
      }
    };
    const running = `ank_agent_workload_state{workload="watcher",state="Running"}`;
    await until(async () => (await query(running)) !== undefined, 'Prometheus to answer', 60_000);
    expect(await query(running)).to.equal(1);
    expect(await query(`ank_agent_workload_restarts_total{workload="flaky"}`)).to.be.at.least(1);
    expect(await query(`ank_agent_container_memory_bytes{workload="watcher"}`)).to.be.greaterThan(0);
    const p90 = await query(`histogram_quantile(0.9, ank_agent_workload_state_report_seconds_bucket{workload="flaky"})`);
    expect(p90, 'the 90th percentile of the report time').to.be.within(0, 2.5);
  });

  it('an address it cannot listen on, or one that is none, ends the agent with the reason', async () => {
    const port = await freePort();
    const blocker = net.createServer().listen(port, '127.0.0.1');
    await new Promise((resolve) => blocker.once('listening', resolve));
    try {
      const run = specFolder('ank-metrics-refused-');
      const said = spawnChecked(process.execPath, [BIN, '-n', 'x', '-k', '-s', e2e.server.url, '-r', run, '--metrics', `127.0.0.1:${port}`], '');
      expect(said).to.contain(`ank-agent: error: Cannot serve the metrics: listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
      // Ended, it leaves no Podman service behind (one started for its run lives on until idle otherwise).
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(podmanServicesIn(run), 'Podman services left').to.deep.equal([]);
    } finally {
      blocker.close();
    }
    const bad = spawnChecked(process.execPath, [BIN, '-n', 'x', '-k', '-r', specFolder('ank-metrics-none-'), '--metrics', 'nowhere'], '');
    expect(bad).to.contain("The metrics address 'nowhere' is none");
  });
});

describe('the metrics endpoint against slow, many and hostile scrapers', function () {
  this.timeout(60_000);
  const e2e = endToEnd('scrapers');
  /** Starts the agent with metrics on a free port and waits until it answers. */
  const started = async () => {
    const port = await freePort();
    e2e.start({ args: ['--metrics', `127.0.0.1:${port}`] });
    await until(async () => (await scrape(port).catch(() => '')).includes('ank_agent_info'), 'the endpoint', 10_000);
    return port;
  };
  /** One GET on a connection of its own: its status, or how it failed. */
  const get = (port: number) =>
    new Promise<string>((resolve) => {
      http
        .get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(String(res.statusCode)));
        })
        .on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });

  it('cuts off a scraper that sends its request a byte a second after 10 s, and answers the others meanwhile', async () => {
    const port = await started();
    const opened = Date.now();
    const slow = Array.from({ length: 30 }, () => {
      const socket = net.connect(port, '127.0.0.1');
      const request = 'GET /metrics HTTP/1.1\r\nHost: x\r\n';
      let sent = 0;
      const write = () => socket.write(request[sent++ % request.length]);
      socket.on('connect', write);
      const drip = setInterval(write, 1000);
      return new Promise<number>((resolve) => {
        socket.on('error', () => undefined);
        socket.on('close', () => {
          clearInterval(drip);
          resolve(Date.now() - opened);
        });
      });
    });
    const answers: string[] = [];
    for (let i = 0; i < 20; i++) {
      answers.push(await get(port));
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(answers, 'the normal scrapes while 30 slow ones are open').to.deep.equal(Array(20).fill('200'));
    const closedAfter = await Promise.all(slow);
    expect(Math.max(...closedAfter), 'every slow scraper cut off within about 10 s').to.be.within(9_000, 13_500);
  });

  it('answers 1 000 scrapes at once: each gets the metrics or a 503 to come back, none is reset', async () => {
    const port = await started();
    const outcomes = await Promise.all(Array.from({ length: 1000 }, () => get(port)));
    const counted: Record<string, number> = {};
    for (const o of outcomes) counted[o] = (counted[o] ?? 0) + 1;
    expect(
      Object.keys(counted).filter((o) => o !== '200' && o !== '503'),
      JSON.stringify(counted),
    ).to.deep.equal([]);
    expect(counted['200'], 'most are answered with the metrics').to.be.at.least(900);
  });

  it('refuses a socket whose folder another user owns, or that a link of another user leads to, naming it', () => {
    const base = specFolder('ank-sock-');
    const theirs = path.join(base, 'theirs');
    mkdirSync(theirs);
    chownSync(theirs, 65534, 65534);
    // A run folder of the spec's: the default one (/tmp/ankaios) would outlive it.
    const folder = specFolder('ank-sock-run-');
    const run = (socket: string) => spawnChecked(process.execPath, [BIN, '-n', 'x', '-k', '-s', e2e.server.url, '-r', folder, '--metrics', socket], '');
    expect(run(path.join(theirs, 'm.sock'))).to.contain(`The folder '${theirs}' above the socket '${theirs}/m.sock' belongs to another user (uid 65534)`);
    const link = path.join(base, 'link');
    symlinkSync('/run', link);
    lchownSync(link, 65534, 65534);
    expect(run(path.join(link, 'm.sock'))).to.contain(`The link '${link}' above the socket '${link}/m.sock' belongs to another user (uid 65534)`);
    expect(existsSync('/run/m.sock'), 'nothing made where the link leads').to.equal(false);
    const planted = path.join(base, 'planted.sock');
    const theirSocket = net.createServer().listen(planted);
    try {
      chownSync(planted, 65534, 65534);
      expect(run(planted)).to.contain(`The socket '${planted}' belongs to another user (uid 65534)`);
    } finally {
      theirSocket.close();
    }
  });
});

function hasPromtool(): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v promtool'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Runs a command with `input`; what it printed on failure, or '' when it succeeded. */
function spawnChecked(command: string, args: string[], input: string): string {
  try {
    execFileSync(command, args, { input, stdio: 'pipe', encoding: 'utf8' });
    return '';
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return `${e.stdout ?? ''}${e.stderr ?? ''}`;
  }
}
