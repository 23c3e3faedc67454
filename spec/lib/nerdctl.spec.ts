import { expect } from 'chai';
import {
  containerdReading,
  containerdState,
  parseContainers,
  parseEvent,
  splitScope,
  parseLabels,
  parseSize,
  parseStats,
  parseStatus,
} from '../../lib/runtimes/containerd/nerdctl.js';
import { formatState } from '../../lib/execution-state.js';

const row = (o: Record<string, string>) => JSON.stringify({ Command: '"sleep 1"', Image: 'localhost/busybox:latest', ...o });
const event = (Topic: string, body: Record<string, unknown>) =>
  JSON.stringify({ Timestamp: '2026-11-25T12:56:25.654271291Z', ID: '', Namespace: 'default', Topic, Status: 'unknown', Event: JSON.stringify(body) });

describe('what the agent reads of nerdctl (lib/runtimes/containerd/nerdctl.ts)', () => {
  // swdd~containerd-nerdctlcli-list-workload-names-by-label~1
  it("reads nerdctl's label string, whose values may hold '=' and JSON", () => {
    expect(parseLabels('name=app.1.agent_A,agent=agent_A,nerdctl/ipc={"mode":"private"},x=a=b')).to.deep.equal({
      name: 'app.1.agent_A',
      agent: 'agent_A',
      'nerdctl/ipc': '{"mode":"private"}',
      x: 'a=b',
    });
    expect(parseLabels('')).to.deep.equal({});
  });

  // swdd~containerd-state-getter-maps-state~1
  it("reads the state word and the exit code of nerdctl's Status column", () => {
    expect(
      ['Up', 'Exited (3) 2 seconds ago', 'Exited (0) About a minute ago', 'Restarting (1) 1 second ago', 'Created', 'Paused', 'Unknown', ''].map(parseStatus),
    ).to.deep.equal([
      { state: 'running' },
      { state: 'exited', exitCode: 3 },
      { state: 'exited', exitCode: 0 },
      { state: 'restarting', exitCode: 1 },
      { state: 'created' },
      { state: 'paused' },
      { state: 'unknown' },
      { state: '' },
    ]);
  });

  // swdd~containerd-nerdctlcli-container-state-cache-all-containers~1, swdd~containerd-nerdctlcli-lists-workloads-by-label~1
  it('reads the rows of `nerdctl ps --format json` as containers with their image, passing over lines that are none', () => {
    const output = [
      row({ ID: 'a'.repeat(64), Names: 'app.1.agent_A', Status: 'Exited (3) 1 second ago', Labels: 'name=app.1.agent_A,agent=agent_A' }),
      'time="…" level=warning msg="failed to inspect NetNS"',
      '{broken',
      row({ ID: '', Names: 'no id', Status: 'Up', Labels: '' }),
      row({ ID: 'b'.repeat(64), Names: 'other', Status: 'Up', Labels: 'agent=agent_B' }),
    ].join('\n');
    expect(parseContainers(output)).to.deep.equal([
      {
        id: 'a'.repeat(64),
        names: ['app.1.agent_A'],
        state: 'exited',
        exitCode: 3,
        labels: { name: 'app.1.agent_A', agent: 'agent_A' },
        image: 'localhost/busybox:latest',
      },
      { id: 'b'.repeat(64), names: ['other'], state: 'running', labels: { agent: 'agent_B' }, image: 'localhost/busybox:latest' },
    ]);
    expect(parseContainers('')).to.deep.equal([]);
  });

  // swdd~containerd-state-getter-maps-state~1, swdd~containerd-state-getter-returns-unknown-state~1
  it("maps containerd's states as the released connector does; anything else is Unknown", () => {
    const shown = (state: string, exitCode?: number) => formatState(containerdState({ id: 'x', state, exitCode }));
    expect([
      shown('created'),
      shown('restarting', 1),
      shown('running'),
      shown('exited', 0),
      shown('exited', 137),
      shown('dead', 1),
      shown('removing'),
      shown('paused'),
      shown('pausing'),
    ]).to.deep.equal([
      'Pending(Starting): created',
      'Pending(Starting): restarting',
      'Running(Ok)',
      'Succeeded(Ok)',
      "Failed(ExecFailed): Exit code: '137'",
      "Failed(ExecFailed): Exit code: '1'",
      'Stopping(Stopping): removing',
      'Failed(Unknown): paused',
      'Failed(Unknown): pausing',
    ]);
  });

  // swdd~containerd-state-getter-returns-lost-state~1
  it('reads a workload by its container id, whole or cut short; a container that is gone is Lost', () => {
    const running = new Map([['c'.repeat(64), { id: 'c'.repeat(64), state: 'running' }]]);
    expect(formatState(containerdReading('c'.repeat(64))(running).state)).to.equal('Running(Ok)');
    expect(formatState(containerdReading('c'.repeat(12))(running).state)).to.equal('Running(Ok)');
    expect(formatState(containerdReading('d'.repeat(64))(running).state)).to.equal('Failed(Lost)');
  });

  // swdd~containerd-nerdctlcli-uses-container-state-cache~1
  it("takes containerd's task exits, starts, pauses and container deletions as the cache's words: exited, started, paused, resumed, removed, created", () => {
    const id = 'e'.repeat(64);
    expect(parseEvent(event('/tasks/exit', { container_id: id, id, pid: 1, exit_status: 5 }))).to.deep.equal({
      id,
      change: 'exited',
      exitCode: 5,
      at: Date.parse('2026-11-25T12:56:25.654271291Z'),
      namespace: 'default',
    });
    expect(parseEvent(event('/tasks/start', { container_id: id, pid: 1 }))?.change).to.equal('started');
    expect(parseEvent(event('/containers/delete', { id }))?.change).to.equal('removed');
    expect(parseEvent(event('/tasks/paused', { container_id: id }))?.change).to.equal('paused');
    expect(parseEvent(event('/tasks/resumed', { container_id: id }))?.change).to.equal('resumed');
    expect(parseEvent(event('/containers/create', { id, image: 'x' }))?.change).to.equal('created');
    // An exec's exit in the container is not the container's; snapshots and garbage are nothing.
    expect(parseEvent(event('/tasks/exit', { container_id: id, id: 'exec-1', exit_status: 1 }))).to.equal(undefined);
    expect(parseEvent(event('/snapshot/prepare', { key: id }))).to.equal(undefined);
    expect(parseEvent('not json')).to.equal(undefined);
    expect(parseEvent(JSON.stringify({ Topic: '/tasks/exit', Event: 'not json' }))).to.equal(undefined);
  });

  // swdd~containerd-nerdctlcli-uses-container-state-cache~1
  it('tells the namespace a scope selects, and the options that select the containerd, so one event stream serves every namespace of it', () => {
    expect(splitScope([], {})).to.deep.equal({ namespace: 'default', containerd: [] });
    expect(splitScope([], { CONTAINERD_NAMESPACE: 'fromenv' })).to.deep.equal({ namespace: 'fromenv', containerd: [] });
    expect(splitScope(['--address', '/run/c.sock', '--namespace', 'a', '-n', 'b'], {})).to.deep.equal({
      namespace: 'b',
      containerd: ['--address', '/run/c.sock'],
    });
    expect(splitScope(['--namespace=x', '--snapshotter=native'], {})).to.deep.equal({ namespace: 'x', containerd: ['--snapshotter=native'] });
  });

  it('reads `nerdctl stats` rows into figures, binary and decimal units alike; rows that are none are passed over', () => {
    expect(['588KiB', '1.1kB', '0B', '2.5MiB', '3GB', 'x', ''].map(parseSize)).to.deep.equal([588 * 1024, 1100, 0, 2.5 * 2 ** 20, 3e9, 0, 0]);
    const row =
      '{"Name":"app.1.agent_A","ID":"adbdb5316813","CPUPerc":"12.50%","MemUsage":"588KiB / 8EiB","MemPerc":"0.00%","NetIO":"1.1kB / 472B","BlockIO":"0B / 4.1kB","PIDs":"2"}';
    expect(parseStats(`${row}\nnot a row\n{"no":"name"}`)).to.deep.equal([
      {
        Name: 'app.1.agent_A',
        CPU: 12.5,
        MemUsage: 588 * 1024,
        MemLimit: 8 * 2 ** 60,
        NetInput: 1100,
        NetOutput: 472,
        BlockInput: 0,
        BlockOutput: 4100,
        PIDs: 2,
      },
    ]);
  });
});
