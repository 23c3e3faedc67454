// Bench part: a fleet under the released server. N agents on one machine, each with 5 workloads, all on the
// file-backed fake podman (bench/fake-podman.mjs: what shows is the agents' own cost, not Podman's), driven by
// the released `ank` CLI. Ours and the released agents alternate: all started at once → all connected, then
// (every agent settled) the fleet's workloads applied → all Running(Ok), deleted → all gone, and the agents' CPU in each (from
// each thread's schedstat). Every agent hears every other agent's states: that is what grows with the fleet.
// Then one of ours in a fleet of released agents: its CPU beside theirs for the same work.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { openSync, statSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { ANKAIOS_BIN, Cluster, manifest, workloadYaml } from '../../scripts/harness/ankaios.js';
import { BIN } from '../../scripts/harness/agent.js';
import { processCpuMs, settled, withoutPodmanService } from '../measure.js';
import { median, record } from '../report.js';
import { specFolder } from '../../scripts/harness/temp.js';

const PER_AGENT = 5;
const cpuEach = (agents: readonly ChildProcess[]) => agents.map((a) => processCpuMs(a.pid!));
const sum = (values: readonly number[]) => values.reduce((total, v) => total + v, 0);

type Kind = 'ours' | 'released';

interface FleetFigures {
  readonly connectedMs: number;
  readonly applyMs: number;
  readonly applyCpuMs: number;
  readonly deleteMs: number;
  readonly deleteCpuMs: number;
  /** Podman processes the fleet started (its event streams aside), from start to all gone. */
  readonly podmanCalls: number;
  /** Each agent's CPU in the apply and in the delete, in the order of the kinds asked. */
  readonly applyCpuEach: readonly number[];
  readonly deleteCpuEach: readonly number[];
}

/** One fleet, an agent of each kind asked, from start to all gone. */
async function fleet(kinds: readonly Kind[]): Promise<FleetFigures> {
  const n = kinds.length;
  const cluster = new Cluster();
  const fake = specFolder('ank-fleet-podman-');
  symlinkSync(path.resolve('bench/fake-podman.mjs'), path.join(fake, 'podman'));
  const containers = path.join(fake, 'containers');
  execFileSync('mkdir', [containers]);
  const env = { ...process.env, PATH: `${fake}:${process.env.PATH ?? ''}`, FAKE_PODMAN_DIR: containers, RUST_LOG: 'warn' };
  const names = kinds.map((kind, i) => `fleet_${kind}_${i}`);
  const agents: ChildProcess[] = [];
  const noService = withoutPodmanService();
  try {
    await cluster.startServer();
    const t0 = performance.now();
    for (const [i, kind] of kinds.entries()) {
      const name = names[i];
      const run = specFolder('ank-fleet-run-');
      const args = ['-n', name, '-s', cluster.url, '-k', '-r', run, ...(kind === 'ours' ? ['-x', noService] : [])];
      // What each agent said stays in the cluster's folder.
      const log = openSync(path.join(cluster.folder, `${name}.log`), 'w');
      const stdio: ['ignore', number, number] = ['ignore', log, log];
      agents.push(kind === 'ours' ? spawn(process.execPath, [BIN, ...args], { stdio, env }) : spawn(path.join(ANKAIOS_BIN, 'ank-agent'), args, { stdio, env }));
    }
    await cluster.until(async () => (await cluster.agents()).length === n, 'every agent connected', 120_000);
    const connectedMs = performance.now() - t0;
    // The apply is measured from a settled fleet: after its hello an agent of ours still loads its run, which
    // is the start's cost, not the apply's.
    for (const agent of agents) await settled(agent.pid!);

    const workloads = names.flatMap((agent, i) => Array.from({ length: PER_AGENT }, (_, j) => workloadYaml(`w${i}x${j}`, agent, 'sleep 3600')));
    let cpu = cpuEach(agents);
    const t1 = performance.now();
    await cluster.apply(manifest(...workloads));
    const all = n * PER_AGENT;
    await cluster.until(
      async () => (await cluster.states()).filter((s) => s.state === 'Running' && s.subState === 'Ok').length === all,
      'every workload Running(Ok)',
      300_000,
    );
    const applyMs = performance.now() - t1;
    const applyCpuEach = cpuEach(agents).map((ms, i) => ms - cpu[i]);

    cpu = cpuEach(agents);
    const t2 = performance.now();
    const deleted = names.flatMap((_, i) => Array.from({ length: PER_AGENT }, (_, j) => `w${i}x${j}`));
    await cluster.ank('--no-wait', 'delete', 'workload', ...deleted);
    await cluster.until(async () => (await cluster.states()).length === 0, 'every workload gone', 300_000);
    const deleteMs = performance.now() - t2;
    const deleteCpuEach = cpuEach(agents).map((ms, i) => ms - cpu[i]);
    const podmanCalls = statSync(path.join(fake, 'calls'), { throwIfNoEntry: false })?.size ?? 0;
    return { connectedMs, applyMs, applyCpuMs: sum(applyCpuEach), deleteMs, deleteCpuMs: sum(deleteCpuEach), podmanCalls, applyCpuEach, deleteCpuEach };
  } finally {
    for (const agent of agents) agent.kill('SIGKILL');
    // A killed agent's fake `podman events` would read on for ever: every process of this fake podman goes too.
    spawnSync('pkill', ['-KILL', '-f', `${fake}/podman`]);
    await cluster.stopAll();
  }
}

type NumberKey = Exclude<keyof FleetFigures, 'applyCpuEach' | 'deleteCpuEach'>;

export async function benchFleetRun(quick: boolean): Promise<void> {
  if (!ANKAIOS_BIN) {
    console.log('\nfleet-run needs ANKAIOS_BIN (the released ank-server, ank and ank-agent): skipped.');
    return;
  }
  const rounds = quick ? 1 : 3;
  for (const n of [10, 30]) {
    console.log(`\nA fleet of ${n} agents × ${PER_AGENT} workloads under the released server (fake podman; ${rounds} round(s), alternating)`);
    const runs: Record<Kind, FleetFigures[]> = { ours: [], released: [] };
    for (let round = 0; round < rounds; round++) {
      runs.ours.push(await fleet(Array(n).fill('ours')));
      runs.released.push(await fleet(Array(n).fill('released')));
    }
    const of = (kind: Kind, key: NumberKey) => median(runs[kind].map((r) => r[key]));
    const ratio = (key: NumberKey) => of('ours', key) / of('released', key);
    for (const kind of ['ours', 'released'] as const) {
      record({
        name: `${n} × ${kind}: all started at once → all connected`,
        value: of(kind, 'connectedMs'),
        unit: 'ms',
        target: kind === 'ours' && n === 30 ? '≤1500' : undefined,
      });
      record({ name: `${n} × ${kind}: apply → all Running(Ok)`, value: of(kind, 'applyMs'), unit: 'ms' });
      record({ name: `${n} × ${kind}: the agents' CPU in the apply`, value: of(kind, 'applyCpuMs'), unit: 'ms' });
      record({ name: `${n} × ${kind}: delete → all gone`, value: of(kind, 'deleteMs'), unit: 'ms' });
      record({ name: `${n} × ${kind}: the agents' CPU in the delete`, value: of(kind, 'deleteCpuMs'), unit: 'ms' });
      record({ name: `${n} × ${kind}: podman processes, start to all gone`, value: of(kind, 'podmanCalls'), unit: '' });
    }
    record({ name: `${n} agents: apply → all Running(Ok), ours / released`, value: ratio('applyMs'), unit: '×', target: n === 30 ? '≤1.5' : undefined });
    record({ name: `${n} agents: the agents' CPU in the apply, ours / released`, value: ratio('applyCpuMs'), unit: '×' });
  }
  await oneAmongReleased(rounds);
}

/**
 * One of ours in a fleet of 29 released agents: its CPU for the fleet's apply and delete (every agent hears every
 * state of the fleet) against the released agents' median, in the same fleet.
 */
async function oneAmongReleased(rounds: number): Promise<void> {
  console.log(`\nOne of ours among 29 released agents × ${PER_AGENT} workloads (fake podman; ${rounds} round(s))`);
  const runs = { apply: [] as Array<[number, number]>, delete: [] as Array<[number, number]> };
  for (let round = 0; round < rounds; round++) {
    const { applyCpuEach, deleteCpuEach } = await fleet(['ours', ...Array<Kind>(29).fill('released')]);
    runs.apply.push([applyCpuEach[0], median(applyCpuEach.slice(1))]);
    runs.delete.push([deleteCpuEach[0], median(deleteCpuEach.slice(1))]);
  }
  for (const what of ['apply', 'delete'] as const) {
    const [ours, theirs] = [median(runs[what].map(([o]) => o)), median(runs[what].map(([, r]) => r))];
    record({
      name: `one of ours among 29 released: its CPU in the fleet's ${what} / a released agent's`,
      value: median(runs[what].map(([o, r]) => o / r)),
      unit: '×',
      target: '≤2.5',
      note: `${ours.toFixed(1)} ms against ${theirs.toFixed(1)} ms`,
    });
  }
}
