// The figures the metrics endpoint shows, as the pure reducer adds them up (lib/metrics.ts); the endpoint
// itself, scraped by promtool and Prometheus, is spec/bin/metrics.spec.ts.
import { expect } from 'chai';
import { ExecutionState, exitedWith } from '../../lib/execution-state.js';
import { ofWorkloads } from '../../lib/runtimes/podman/stats.js';
import { FORGET_REMOVED_MS, type MetricsEvent, type MetricsFigures, byWorkload, forgetRemoved, noFigures, stepFigures } from '../../lib/metrics.js';

const AGENT = 'agent_A';
const states = (workloadName: string, ...list: ExecutionState[]): MetricsEvent[] =>
  list.map((executionState) => ({ kind: 'states', states: [{ instanceName: { workloadName, agentName: AGENT, id: 'i' }, executionState }] }));
const reduced = (events: readonly MetricsEvent[], from: MetricsFigures = noFigures(AGENT), at = 0) =>
  events.reduce((figures, event) => stepFigures(figures, event, at), from);

describe('the metrics figures (a reducer of what the agent tells)', () => {
  it('counts a start after an end as a restart, and keeps the exit code of the last run', () => {
    const run = [ExecutionState.starting(), ExecutionState.running(), exitedWith(3)];
    const restart = [ExecutionState.stoppingRequested(), ExecutionState.removed(), ExecutionState.starting(), ExecutionState.running()];
    const figures = reduced([...states('flaky', ...run, ...restart), ...states('steady', ExecutionState.starting(), ExecutionState.running())]);
    expect(figures.workloads.get('flaky')).to.include({ restarts: 1, exitCode: 3 });
    expect(figures.workloads.get('flaky')?.state.state).to.equal('Running');
    expect(figures.workloads.get('steady')).to.include({ restarts: 0, exitCode: undefined });
  });

  it("passes over the states of other agents' workloads", () => {
    const other: MetricsEvent = {
      kind: 'states',
      states: [{ instanceName: { workloadName: 'w', agentName: 'agent_B', id: 'i' }, executionState: ExecutionState.running() }],
    };
    expect(reduced([other]).workloads.size).to.equal(0);
  });

  // rx~health-running-when-healthy~1
  it('shows a checked workload unhealthy (0) while its check has not passed or failed, healthy (1) once it passed; one without a check has no health', () => {
    const waiting: ExecutionState = { ...ExecutionState.starting('Waiting for its health check to pass.'), health: 'starting' };
    const healthy: ExecutionState = { ...ExecutionState.running(), health: 'healthy' };
    const unhealthy: ExecutionState = { ...ExecutionState.failed("Health check 'x' failed."), health: 'unhealthy' };
    const healths = (events: MetricsEvent[]) => {
      const seen: Array<number | undefined> = [];
      events.reduce((figures, event) => {
        const next = stepFigures(figures, event, 0);
        seen.push(next.workloads.get('checked')?.healthy);
        return next;
      }, noFigures(AGENT));
      return seen;
    };
    expect(healths(states('checked', waiting, healthy, unhealthy))).to.deep.equal([0, 1, 0]);
    expect(reduced(states('plain', ExecutionState.running())).workloads.get('plain')?.healthy).to.equal(undefined);
  });

  it('forgets a workload Removed for 10 s; one that starts again at once (a restart) is kept', () => {
    const removed = reduced(states('gone', ExecutionState.running(), ExecutionState.removed()), noFigures(AGENT), 1_000);
    expect(forgetRemoved(removed, 1_000 + FORGET_REMOVED_MS - 1).workloads.has('gone')).to.equal(true);
    expect(forgetRemoved(removed, 1_000 + FORGET_REMOVED_MS).workloads.has('gone')).to.equal(false);
    const restarted = reduced(states('gone', ExecutionState.starting()), removed, 2_000);
    expect(forgetRemoved(restarted, 1_000 + FORGET_REMOVED_MS).workloads.has('gone')).to.equal(true);
  });

  it('counts connections (the first is no reconnect), requests by decision, log entries and restarts of the event stream', () => {
    const figures = reduced(
      [
        { kind: 'connection', online: true, line: '1' },
        { kind: 'connection', online: false },
        { kind: 'connection', online: true, line: '0.8' },
        { kind: 'authorized', workloadName: 'w', allowed: true },
        { kind: 'authorized', workloadName: 'w', allowed: false },
        { kind: 'authorized', workloadName: 'w', allowed: false },
        { kind: 'logEntries', count: 3, bytes: 120, cut: 1 },
        { kind: 'logEntries', count: 2, bytes: 80, cut: 0 },
        { kind: 'eventsRestarted', engine: 'Podman' },
        { kind: 'eventsRestarted', engine: 'containerd' },
      ],
      noFigures(AGENT),
      5_000,
    );
    expect(figures).to.deep.include({ online: true, since: 5_000, line: '0.8', connections: 2, eventsRestarts: 1 });
    expect(figures.requests.get('w')).to.deep.equal({ allowed: 1, denied: 2 });
    expect(figures.log).to.deep.equal({ entries: 5, bytes: 200, cut: 1 });
  });

  // rx~image-gc~1
  it("counts the images the collector removed by engine, and keeps how full each engine's image store was when last looked at", () => {
    const figures = reduced(
      [
        { kind: 'images', engine: 'podman', usedRatio: 0.9 },
        { kind: 'images', engine: 'podman', removed: 1 },
        { kind: 'images', engine: 'podman', removed: 1 },
        { kind: 'images', engine: 'podman', usedRatio: 0.7 },
        { kind: 'images', engine: 'containerd', removed: 1 },
      ],
      noFigures(AGENT),
      5_000,
    );
    expect([...figures.images]).to.deep.equal([
      ['podman', { removed: 2, usedRatio: 0.7 }],
      ['containerd', { removed: 1, usedRatio: undefined }],
    ]);
  });

  it("sums a pod's containers as its workload's figures (memory limit the largest, network the pod's own) and a container's by its name", () => {
    const figures = (Name: string, n: number, Pod?: string) => ({
      Name,
      Pod,
      CPU: n,
      MemUsage: n,
      MemLimit: n,
      NetInput: n,
      NetOutput: n,
      BlockInput: n,
      BlockOutput: n,
      PIDs: n,
    });
    const all = [
      figures('web.abc.agent_A', 1),
      figures('web.abc.agent_B', 50),
      figures('pod-app', 2, 'p1'),
      figures('pod-db', 3, 'p1'),
      figures('other', 9, 'p2'),
    ];
    const byName = byWorkload(ofWorkloads(all, AGENT, (pod) => (pod === 'p1' ? 'kube' : undefined)));
    expect([...byName.keys()]).to.deep.equal(['web', 'kube']);
    expect(byName.get('kube')).to.deep.include({ CPU: 5, MemUsage: 5, MemLimit: 3, NetInput: 3, BlockInput: 5, PIDs: 5 });
  });
});
