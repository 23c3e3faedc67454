// Bench part: Scheduling throughput on the pure pipelines: an in-memory runtime, a layered dependency DAG.
import { performance } from 'node:perf_hooks';
import { EMPTY, Subject, of, asyncScheduler } from 'rxjs';
import { ExecutionState } from '../../lib/execution-state.js';
import type { FromServer } from '../../lib/messages.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { runWorkloads } from '../../streams/run-workloads.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { median, record } from '../report.js';

/** N workloads in 10 layers; each depends on one of the layer before, with running or succeeded. */
function layeredDag(n: number): WorkloadSpec[] {
  const width = Math.max(1, Math.floor(n / 10));
  return Array.from({ length: n }, (_, i) => {
    const layer = Math.floor(i / width);
    const dependencies = layer === 0 ? {} : { [`w${(layer - 1) * width + (i % width)}`]: (layer % 2 ? 'Running' : 'Succeeded') as 'Running' | 'Succeeded' };
    return workload(`w${i}`, { dependencies });
  });
}

function scheduling(n: number): { create: number; remove: number } {
  const specs = layeredDag(n);
  let creates = 0;
  let deletes = 0;
  const runtime = new FakeRuntime({
    create: (spec) => {
      creates++;
      return of(`id-${spec.instanceName.workloadName}`);
    },
    states: () => of(ExecutionState.running(), ExecutionState.succeeded()),
    delete: () => {
      deletes++;
      return EMPTY;
    },
  });
  const input = new Subject<FromServer>();
  const sub = runWorkloads(input, {
    agentName: 'agent_A',
    runtimes: new Map([['fake', runtime]]),
    scheduler: asyncScheduler,
    prepare: () => of({}),
    release: () => EMPTY,
  }).subscribe();
  const t0 = performance.now();
  input.next({ kind: 'serverHello', added: specs });
  const t1 = performance.now();
  if (creates !== n) throw new Error(`only ${creates} of ${n} created`);
  const dependents = new Map<string, Record<string, 'NotPendingNorRunning'>>();
  for (const s of specs)
    for (const [dep, c] of Object.entries(s.dependencies))
      if (c === 'Running') dependents.set(dep, { ...dependents.get(dep), [s.instanceName.workloadName]: 'NotPendingNorRunning' });
  input.next({
    kind: 'updateWorkload',
    added: [],
    deleted: specs.map((s) => ({ instanceName: s.instanceName, dependencies: dependents.get(s.instanceName.workloadName) ?? {} })),
  });
  const t2 = performance.now();
  if (deletes !== n) throw new Error(`only ${deletes} of ${n} deleted`);
  sub.unsubscribe();
  return { create: t1 - t0, remove: t2 - t1 };
}

export function benchScheduling(): void {
  console.log('\n1. Scheduling throughput (pure pipelines, in-memory runtime; layered dependency DAG)');
  // Warm the JIT up first, or the smallest N measures compilation.
  for (let i = 0; i < 3; i++) scheduling(5000);
  let previous: number | undefined;
  for (const n of [100, 1000, 10_000]) {
    const runs = Array.from({ length: n === 10_000 ? 3 : 5 }, () => scheduling(n));
    const create = median(runs.map((r) => r.create));
    const remove = median(runs.map((r) => r.remove));
    record({ name: `ServerHello → last create, N=${n}`, value: create, unit: 'ms', note: `${Math.round(n / (create / 1000))} ops/s` });
    record({ name: `UpdateWorkload deleting all → last delete, N=${n}`, value: remove, unit: 'ms', note: `${Math.round(n / (remove / 1000))} ops/s` });
    if (previous !== undefined) record({ name: `growth of create time for 10× N`, value: create / previous, unit: '×', target: '≈10 (linear)' });
    previous = create;
  }
}
