// The WorkloadStateStore: the latest execution state of every workload instance the agent knows of.
import { type ExecutionState, keepLatest } from './execution-state.js';
import type { WorkloadState } from './messages.js';
import { instanceKey } from './workload.js';

export class WorkloadStateStore {
  private readonly byWorkload = new Map<string, Map<string, WorkloadState>>();

  /**
   * swdd~agent-manager-stores-all-workload-states~1, swdd~agent-stores-workload-states-of-its-workloads~1:
   * stores the states; `Removed` means "not stored". Returns the names of the workloads that changed.
   */
  update(states: Iterable<WorkloadState>): Set<string> {
    const changed = new Set<string>();
    for (const s of states) {
      const name = s.instanceName.workloadName;
      const key = instanceKey(s.instanceName);
      const instances = this.byWorkload.get(name) ?? new Map<string, WorkloadState>();
      keepLatest(instances, key, s.executionState, s);
      if (instances.size === 0) this.byWorkload.delete(name);
      else this.byWorkload.set(name, instances);
      changed.add(name);
    }
    return changed;
  }

  /** The states of every instance of a workload (usually one; two while it moves or updates). */
  statesOf(workloadName: string): ExecutionState[] {
    return [...(this.byWorkload.get(workloadName)?.values() ?? [])].map((s) => s.executionState);
  }

  all(): WorkloadState[] {
    return [...this.byWorkload.values()].flatMap((m) => [...m.values()]);
  }
}
