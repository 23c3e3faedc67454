// The WorkloadStateStore: the latest execution state of every workload instance the agent knows of.
import { type ExecutionState, forgotten } from './execution-state.js';
import type { WorkloadState } from './messages.js';
import { sameInstance } from './workload.js';

export class WorkloadStateStore {
  /** A workload's instances: one, or two while it moves or updates. An array of them, since a fleet's workloads
   * are many: a map each (~210 bytes against ~60) would cost the memory, and the garbage collector its copying. */
  private readonly byWorkload = new Map<string, WorkloadState[]>();

  /**
   * swdd~agent-manager-stores-all-workload-states~1, swdd~agent-stores-workload-states-of-its-workloads~1:
   * stores the states; `Removed` means "not stored". Returns the names of the workloads that changed.
   */
  update(states: Iterable<WorkloadState>): Set<string> {
    const changed = new Set<string>();
    for (const s of states) {
      const name = s.instanceName.workloadName;
      const instances = this.byWorkload.get(name);
      const at = instances?.findIndex((i) => sameInstance(i.instanceName, s.instanceName)) ?? -1;
      if (!forgotten(s.executionState)) {
        if (!instances) this.byWorkload.set(name, [s]);
        else instances[at < 0 ? instances.length : at] = s;
      } else if (instances && at >= 0) {
        instances.splice(at, 1);
        if (instances.length === 0) this.byWorkload.delete(name);
      }
      changed.add(name);
    }
    return changed;
  }

  /** The states of every instance of a workload (usually one; two while it moves or updates). */
  statesOf(workloadName: string): ExecutionState[] {
    return (this.byWorkload.get(workloadName) ?? []).map((s) => s.executionState);
  }

  all(): WorkloadState[] {
    return [...this.byWorkload.values()].flat();
  }
}
