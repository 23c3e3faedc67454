import { expect } from 'chai';
import { NEVER, finalize, map } from 'rxjs';
import { type FromServer, type ToServer, logEntry } from '../../lib/messages.js';
import { RunningWorkloads } from '../../lib/running-workloads.js';
import { encodeLogEntries } from '../../lib/codec/log-entries.js';
import { MAX_RESPONSE_BYTES, TRUNCATED, TRUNCATED_INFO, entriesOf, fitLine, serveLogs, splitBySize } from '../../streams/logs.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { AGENT, workload } from '../../scripts/harness/fixtures.js';
import { testScheduler } from '../helpers/virtual-time.js';

const app = workload('app');
const other = workload('other', { agent: 'agent_B' });
const request = (requestId: string, ...names: Array<typeof app>): FromServer => ({
  kind: 'logsRequest',
  requestId,
  workloads: names.map((w) => w.instanceName),
  options: { follow: true },
});
/** The workloads the control loops run, as they would have noted them. */
function runningOn(runtime: FakeRuntime, ...workloads: Array<typeof app>): RunningWorkloads {
  const running = new RunningWorkloads();
  for (const w of workloads) running.set(w.instanceName, { runtime, id: `id-${w.instanceName.workloadName}` });
  return running;
}
const show = (m: ToServer) =>
  m.kind === 'logEntries'
    ? `${m.requestId}:${m.entries.map((e) => e.message).join(',')}`
    : m.kind === 'logsStop'
      ? `${m.requestId}:stop ${m.instanceName.workloadName}`
      : m.kind;

describe('workload logs for the server', () => {
  // swdd~agent-handles-logs-requests-from-server~1, swdd~agent-workload-log-facade-starts-log-collection~1, swdd~agent-runtime-manager-creates-log-fetchers~1, swdd~agent-log-fetching-runs-log-fetchers~1, swdd~agent-log-fetching-collects-logs~1, swdd~agent-workload-log-facade-forwards-logs-to-server~1, swdd~agent-workload-log-facade-sends-logs-stop-response~1, swdd~agent-workload-log-facade-automatically-unsubscribes-log-subscriptions~1
  it('batches lines by time (and count), then ends each workload with a LogsStopResponse', () => {
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const runtime = new FakeRuntime({ logs: () => cold('a-b 200ms c|', { a: 'one', b: 'two', c: 'three' }) });
      const out$ = serveLogs(hot('a', { a: request('r1', app) }), { agentName: AGENT, running: runningOn(runtime, app) });
      expectObservable(out$.pipe(map(show))).toBe('100ms a 103ms (bc)', {
        a: 'r1:one,two',
        b: 'r1:three',
        c: 'r1:stop app',
      });
    });
  });

  // swdd~agent-deletes-all-log-subscription-entries-upon-server-gone~1
  it('log streams the server started end when its connection goes (it forgot them), killing them', () => {
    let unsubscribed = false;
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const runtime = new FakeRuntime({ logs: () => cold('a 150ms b', { a: 'x', b: 'y' }).pipe(finalize(() => (unsubscribed = true))) });
      const messages = hot<FromServer>('a 120ms d', { a: request('r1', app), d: { kind: 'disconnected' } });
      expectObservable(serveLogs(messages, { agentName: AGENT, running: runningOn(runtime, app) }).pipe(map(show))).toBe('100ms a', {
        a: 'r1:x',
      });
    });
    expect(unsubscribed).to.equal(true);
  });

  // swdd~agent-handles-logs-cancel-requests-from-server~1, swdd~agent-stops-log-collection-on-removed-subscription~1, swdd~agent-log-fetching-stops-collection-when-dropped~1
  it('stops the log streams of a request on LogsCancelRequest, killing them (no stop response)', () => {
    let unsubscribed = false;
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const runtime = new FakeRuntime({ logs: () => cold('a 150ms b', { a: 'x', b: 'y' }).pipe(finalize(() => (unsubscribed = true))) });
      const messages = hot<FromServer>('a 120ms b', { a: request('r1', app), b: { kind: 'logsCancelRequest', requestId: 'r1' } });
      expectObservable(serveLogs(messages, { agentName: AGENT, running: runningOn(runtime, app) }).pipe(map(show))).toBe('100ms a', {
        a: 'r1:x',
      });
    });
    expect(unsubscribed).to.equal(true);
  });

  it('ignores workloads of other agents and workloads this agent does not run', () => {
    testScheduler().run(({ hot, expectObservable }) => {
      const runtime = new FakeRuntime({ logs: () => NEVER });
      expectObservable(serveLogs(hot('a', { a: request('r1', app, other) }), { agentName: AGENT, running: runningOn(runtime) })).toBe('');
      expect(runtime.calls, 'nothing is asked of the runtime').to.deep.equal([]);
    });
  });

  // swdd~agent-checks-size-of-logs~1
  it('sends a line too long for a response cut and marked, followed in the same response by an entry that says so', () => {
    testScheduler().run(({ cold, hot, expectObservable }) => {
      const long = 'x'.repeat(MAX_RESPONSE_BYTES);
      const runtime = new FakeRuntime({ logs: () => cold('(ab|)', { a: 'before', b: long }) });
      const shown = (m: ToServer) =>
        m.kind === 'logEntries'
          ? m.entries.map((e) => (e.message.length > 100 ? `${e.message.length}${e.message.endsWith(TRUNCATED) ? ' truncated' : ''}` : e.message)).join(',')
          : m.kind;
      expectObservable(serveLogs(hot('a', { a: request('r1', app) }), { agentName: AGENT, running: runningOn(runtime, app) }).pipe(map(shown))).toBe('(ab)', {
        a: `before,${fitLine(long).length} truncated,${TRUNCATED_INFO}`,
        b: 'logsStop',
      });
    });
  });

  // swdd~agent-checks-size-of-logs~1
  it('keeps every encoded response under 2 MiB: splits batches and truncates an over-long line', () => {
    const long = 'x'.repeat(MAX_RESPONSE_BYTES * 2);
    const cut = fitLine(long);
    expect(Buffer.byteLength(cut)).to.be.below(MAX_RESPONSE_BYTES);
    expect(cut.endsWith(TRUNCATED)).to.equal(true);
    expect(fitLine('short')).to.equal('short');
    const entries = [...Array.from({ length: 5 }, () => logEntry(app.instanceName, 'y'.repeat(700 * 1024))), ...entriesOf(app.instanceName, long)];
    const groups = splitBySize(entries);
    expect(groups.map((g) => g.length)).to.deep.equal([2, 2, 1, 2]);
    // What goes to the server: the response as encoded, envelope and all.
    for (const g of groups) expect(encodeLogEntries(`${app.instanceName.workloadName}@request`, g).length).to.be.at.most(MAX_RESPONSE_BYTES);
  });
});
