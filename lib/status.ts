// The rows of the standalone status view, like `ank get workloads`.
import { formatState } from './execution-state.js';
import type { DesiredState } from './desired-state.js';
import type { WorkloadState } from './messages.js';
import { instanceKey } from './workload.js';

/** What the local server of standalone mode knows: the desired state and the states of the agent's workloads. */
export interface LocalSnapshot {
  readonly desired?: DesiredState;
  /** The latest state of every instance of the agent's workloads. */
  readonly states: ReadonlyMap<string, WorkloadState>;
}

export interface StatusRow {
  readonly workload: string;
  readonly agent: string;
  readonly runtime: string;
  readonly state: string;
  /** What the agent's health checks say (`starting`, `healthy`, `unhealthy`); '' for a workload without one. */
  readonly health: string;
  readonly info: string;
}

/** swdd~api-object-serialization~1: one row per workload of the desired state, sorted by name; a workload with a health check shows its health. */
export function statusRows(agentName: string, desired: DesiredState | undefined, states: ReadonlyMap<string, WorkloadState>): StatusRow[] {
  if (!desired) return [];
  return [...desired.workloads.values()]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((w) => {
      const { spec } = w;
      const agent = spec.instanceName.agentName;
      const row = { workload: w.name, agent, runtime: w.runtime, health: '' };
      if (agent === '') return { ...row, state: 'NotScheduled', info: '' };
      if (agent !== agentName) return { ...row, state: 'NotScheduled', info: `for agent '${agent}', not this one` };
      const current = states.get(instanceKey(spec.instanceName));
      if (!current) return { ...row, state: 'Pending(Initial)', info: '' };
      const [state, ...info] = formatState(current.executionState).split(': ');
      const health = current.executionState.health ?? '';
      return { ...row, state, health, info: info.join(': ') };
    });
}

/** The rows as a table like `ank get workloads`; a HEALTH column when a workload has a health to show. */
export function formatTable(rows: readonly StatusRow[]): string {
  const head: StatusRow = {
    workload: 'WORKLOAD NAME',
    agent: 'AGENT',
    runtime: 'RUNTIME',
    state: 'EXECUTION STATE',
    health: 'HEALTH',
    info: 'ADDITIONAL INFO',
  };
  const all = [head, ...rows];
  const cols = rows.some((r) => r.health !== '')
    ? (['workload', 'agent', 'runtime', 'state', 'health'] as const)
    : (['workload', 'agent', 'runtime', 'state'] as const);
  const widths = cols.map((c) => Math.max(...all.map((r) => r[c].length)));
  return all.map((r) => [...cols.map((c, i) => r[c].padEnd(widths[i])), r.info].join('   ').trimEnd()).join('\n');
}
