// Bench part: Reaction latency: container exit → Succeeded reported, on events and on polls alone (real Podman).
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { EMPTY, Subject, of, asyncScheduler } from 'rxjs';
import { builtInRuntimes } from '../../bin/wiring.js';
import { silentLogger } from '../../lib/logger.js';
import type { FromServer } from '../../lib/messages.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { instanceKey } from '../../lib/workload.js';
import { runWorkloads } from '../../streams/run-workloads.js';
import { median, p95, record } from '../report.js';
import { PodmanAgent, busybox, cleanup, uniqueAgent } from '../../scripts/harness/podman.js';
import { until, finishedAt } from '../measure.js';
import { harnessCli, harnessProcesses } from '../../scripts/harness/processes.js';

/** A workload that sleeps `script` and exits 0, on a runtime; when its container finished, by its name. */
export interface ExitRuntime {
  readonly make: (name: string, agentName: string, script: string) => WorkloadSpec;
  readonly finishedAt: (name: string) => number;
}

const ON_PODMAN: ExitRuntime = { make: (name, agentName, script) => busybox(name, agentName, { script }), finishedAt };

/** Exit → Succeeded reported (ms) for `count` workloads that exit one after another, the pipelines in-process. */
export async function exitLatencies(events: boolean, count: number, { make, finishedAt: finished }: ExitRuntime = ON_PODMAN): Promise<number[]> {
  const agentName = uniqueAgent('lat');
  const input = new Subject<FromServer>();
  const seen = new Map<string, number>();
  const sub = runWorkloads(input, {
    agentName,
    runtimes: builtInRuntimes(silentLogger, { events, processes: harnessProcesses() }),
    scheduler: asyncScheduler,
    prepare: () => of({}),
    release: () => EMPTY,
  }).subscribe((states) => {
    for (const s of states) if (s.executionState.state === 'Succeeded') seen.set(s.instanceName.workloadName, Date.now());
  });
  try {
    const specs = Array.from({ length: count }, (_, i) => make(`exit${i}`, agentName, `sleep ${(2 + i * 0.37).toFixed(2)}`));
    input.next({ kind: 'serverHello', added: specs });
    await until(() => seen.size === count);
    return specs.map((s) => seen.get(s.instanceName.workloadName)! - finished(instanceKey(s.instanceName)));
  } finally {
    sub.unsubscribe();
    cleanup(agentName);
  }
}

export async function benchLatency(): Promise<void> {
  console.log('\n3. Reaction latency (real Podman: container exit → Succeeded reported; 20 exits)');
  for (const events of [false, true]) {
    const l = await exitLatencies(events, 20);
    const how = events ? "Podman's events" : 'events off: one poll a second';
    record({ name: `exit noticed, median (${how})`, value: median(l), unit: 'ms', target: events ? '<50' : undefined });
    record({ name: `exit noticed, p95 (${how})`, value: p95(l), unit: 'ms', target: events ? '<100' : undefined });
  }
  // The restart itself: without the crash-loop back-off, which would space these quick exits out.
  const agent = new PodmanAgent(uniqueAgent('restart'), undefined, harnessCli('podman'), {
    backoff: { firstDelayMs: 0, maxDelayMs: 0, resetAfterMs: 0 },
  });
  try {
    const w = busybox('phoenix', agent.agentName, { script: 'sleep 1', restartPolicy: 'Always' });
    agent.send({ kind: 'serverHello', added: [w] });
    const restarts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const runs = () => agent.history('phoenix').filter((h) => h === 'Running(Ok)').length;
      const before = runs();
      await until(() => agent.history('phoenix').filter((h) => h === 'Succeeded(Ok)').length > i);
      const finished = finishedAt(instanceKey(w.instanceName));
      await until(() => runs() > before || runs() > i + 1);
      restarts.push(Date.now() - finished);
    }
    record({ name: 'ALWAYS (no back-off): exit → container reported running again, median', value: median(restarts), unit: 'ms', target: '<350' });
  } finally {
    agent.stop();
  }
  const direct = Array.from({ length: 5 }, (_, i) => {
    const t = performance.now();
    execFileSync('podman', ['run', '-d', '--name', `bench-direct-${process.pid}-${i}`, 'localhost/busybox:latest', '/bin/true']);
    const ms = performance.now() - t;
    execFileSync('podman', ['rm', '-f', `bench-direct-${process.pid}-${i}`]);
    return ms;
  });
  record({ name: '`podman run -d` alone (for comparison), median', value: median(direct), unit: 'ms' });
}
