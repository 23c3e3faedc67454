// The metrics endpoint of a running agent, with real Podman workloads, checked by Prometheus' own tools:
// promtool for the exposition, and a real Prometheus server scraping the agent and answering queries.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import { ControlInterfaceClient } from '../helpers/ci-client.js';
import { endToEnd } from '../helpers/end-to-end.js';
import { type AgentStream, addedWorkload, reportedStates } from '../helpers/fake-server.js';
import { IMAGE, busybox, kubePod, spec } from '../helpers/podman.js';
import { until } from '../helpers/wait.js';

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
    stream.send({
      FromServerEnum: {
        case: 'serverHello',
        value: { addedWorkloads: [addedWorkload(flaky), addedWorkload(watcher), addedWorkload(pod), addedWorkload(checked)] },
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
        seriesValue(text, 'ank_agent_workload_healthy', workload('checked')) === 1
      );
    }, 'the container figures');
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
    const dir = mkdtempSync(path.join(tmpdir(), 'ank-prometheus-'));
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
    try {
      const child = e2e.start({ args: ['--metrics', `127.0.0.1:${port}`], stderr: false });
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(code).to.equal(1);
    } finally {
      blocker.close();
    }
    const bad = spawnChecked(process.execPath, [path.resolve('bin/ank-agent.js'), '-n', 'x', '-k', '--metrics', 'nowhere'], '');
    expect(bad).to.contain("The metrics address 'nowhere' is none");
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
