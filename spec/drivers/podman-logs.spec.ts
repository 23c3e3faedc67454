// Workload logs from real Podman.
import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { BehaviorSubject, Subject, lastValueFrom, toArray } from 'rxjs';
import { CAMPAIGN_CLOSED } from '../../lib/log-lines.js';
import { until } from '../../scripts/harness/wait.js';
import type { FromServer, LogsOptions, ToServer } from '../../lib/messages.js';
import { serveLogs } from '../../streams/logs.js';
import { PodmanAgent, busybox, containerOf, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { harnessCli } from '../../scripts/harness/processes.js';

const podmanLogsProcesses = (container: string) => {
  try {
    return execFileSync('pgrep', ['-f', `podman logs .*${container}`], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
};

describe('workload logs (real Podman)', function () {
  this.timeout(60_000);
  before(requirePodman);
  let agent: PodmanAgent;
  const chatty = () => busybox('chatty', agent.agentName, { script: 'for i in 1 2 3 4 5; do echo line $i; done; echo oops >&2; sleep 3600' });
  beforeEach(async () => {
    agent = new PodmanAgent(uniqueAgent('logs'));
    agent.send({ kind: 'serverHello', added: [chatty()] });
    await agent.waitFor('chatty', /^Running/);
    await new Promise((r) => setTimeout(r, 300));
  });
  afterEach(() => agent.stop());

  /** Runs one non-following request to its end. */
  const ask = (options: Partial<LogsOptions>) => {
    const messages = new Subject<FromServer>();
    const out = lastValueFrom(serveLogs(messages, { agentName: agent.agentName, running: agent.running }).pipe(toArray()));
    messages.next({ kind: 'logsRequest', requestId: 'r', workloads: [chatty().instanceName], options: { follow: false, ...options } });
    setTimeout(() => messages.complete(), 3000);
    return out;
  };
  const lines = (out: ToServer[]) => out.flatMap((m) => (m.kind === 'logEntries' ? m.entries.map((e) => e.message) : []));

  // swdd~podman-log-fetching-collects-logs~1, swdd~agent-workload-obj-start-log-fetcher-command~1, swdd~agent-workload-control-loop-creates-log-fetcher~1
  it('sends all lines of stdout and stderr, then the stop response', async () => {
    const out = await ask({});
    expect(lines(out).sort()).to.deep.equal(['line 1', 'line 2', 'line 3', 'line 4', 'line 5', 'oops'].sort());
    expect(out.at(-1)).to.deep.include({ kind: 'logsStop', requestId: 'r' });
  });

  it('honours tail and since', async () => {
    expect(lines(await ask({ tail: 2 }))).to.have.length(2);
    expect(lines(await ask({ since: new Date(Date.now() + 60_000).toISOString() }))).to.deep.equal([]);
  });

  it('follows until cancelled, and the cancel leaves no podman logs process', async () => {
    const messages = new Subject<FromServer>();
    const out: ToServer[] = [];
    const sub = serveLogs(messages, { agentName: agent.agentName, running: agent.running }).subscribe((m) => out.push(m));
    messages.next({ kind: 'logsRequest', requestId: 'f', workloads: [chatty().instanceName], options: { follow: true } });
    const container = containerOf(chatty());
    for (let waited = 0; lines(out).length < 6 && waited < 10_000; waited += 100) await new Promise((r) => setTimeout(r, 100));
    expect(lines(out)).to.have.length(6);
    expect(podmanLogsProcesses(container)).to.have.length(1);
    messages.next({ kind: 'logsCancelRequest', requestId: 'f' });
    for (let waited = 0; podmanLogsProcesses(container).length > 0 && waited < 5000; waited += 100) await new Promise((r) => setTimeout(r, 100));
    expect(podmanLogsProcesses(container)).to.deep.equal([]);
    expect(out.some((m) => m.kind === 'logsStop')).to.equal(false);
    sub.unsubscribe();
  });
});

describe('reading a log stream (a real process through the CLI driver)', () => {
  const sh = harnessCli('/bin/sh');
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('reads nothing while the server connection is full, and goes on when it can take more again', async () => {
    const full$ = new BehaviorSubject(true);
    let count = 0;
    const reading = sh.lines(['-c', 'exec yes'], full$).subscribe(() => (count += 1));
    try {
      await sleep(300);
      expect(count, 'lines read while full').to.equal(0);
      full$.next(false);
      await until(() => count > 10_000, 'lines once the connection takes more', 5000);
      full$.next(true);
      await sleep(100);
      const paused = count;
      await sleep(300);
      expect(count, 'lines read after pausing again').to.equal(paused);
    } finally {
      reading.unsubscribe();
    }
  });

  // swdd~agent-checks-size-of-logs~1
  it('keeps only the first part of a long line; a line over 50 MB closes the collection of its output, and the stream ends', async () => {
    const script =
      "echo stderr >&2; printf 'short\\n'; head -c 5000000 /dev/zero | tr '\\0' a; printf '\\nnext\\n'; head -c 53000000 /dev/zero | tr '\\0' b; printf '\\nnot taken\\n'";
    const lines = await lastValueFrom(sh.lines(['-c', script], undefined, 1024 * 1024).pipe(toArray()));
    const shown = lines.map((l) => (l.length > 100 ? `${l[0]} × ${l.length}` : l));
    // (what the shell and tr say on stderr of the pipe the agent closed depends on how they take SIGPIPE)
    expect(shown.filter((l) => !/stderr|error/.test(l))).to.deep.equal(['short', `a × ${1024 * 1024}`, 'next', CAMPAIGN_CLOSED]);
    expect(shown).to.include('stderr');
  });
});
