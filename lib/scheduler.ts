// The WorkloadScheduler: holds back operations until their inter-workload dependencies allow them.
import { fulfillsAddCondition, fulfillsDeleteCondition } from './dependencies.js';
import { ExecutionState, formatState } from './execution-state.js';
import type { WorkloadState } from './messages.js';
import type { WorkloadStateStore } from './state-store.js';
import type { DeletedWorkload, WorkloadSpec } from './workload.js';
import { type WorkloadOperation, operationTarget } from './workload-operation.js';

export interface Scheduled {
  readonly ready: WorkloadOperation[];
  readonly reports: WorkloadState[];
  /** What each operation put into the queue waits for, in words (for --debug). */
  readonly waits: Array<{ readonly workloadName: string; readonly waitsFor: string; readonly starts?: WorkloadSpec }>;
}

type Waiting = Exclude<WorkloadOperation, { kind: 'updateDeleteOnly' }>;

export class WorkloadScheduler {
  /** The waiting queue, one operation per workload name. */
  private readonly queue = new Map<string, Waiting>();
  /** Which queued workloads wait on a given workload's state: keeps re-evaluation proportional to the change. */
  private readonly waitingOn = new Map<string, Set<string>>();

  constructor(private readonly store: WorkloadStateStore) {}

  /** swdd~agent-handles-new-workload-operations: new operations either run now or wait. */
  schedule(operations: Iterable<WorkloadOperation>): Scheduled {
    const out: Scheduled = { ready: [], reports: [], waits: [] };
    for (const op of operations) {
      const previous = this.dequeue(operationTarget(op));
      // An update of a workload whose create never ran is just a create of the new config.
      if (op.kind === 'update' && previous?.kind === 'create') {
        if (previous.spec.instanceName.id !== op.spec.instanceName.id) {
          out.reports.push({ instanceName: previous.spec.instanceName, executionState: ExecutionState.removed() });
        }
        this.place({ kind: 'create', spec: op.spec }, out, true);
      } else {
        this.place(op, out, true);
      }
    }
    return out;
  }

  /**
   * swdd~agent-handles-workloads-with-fulfilled-dependencies~1: after states changed, releases the waiting
   * operations whose dependencies are now met; the others stay without a new report
   * (swdd~agent-keeps-workloads-with-unfulfilled-workload-dependencies-in-queue~1).
   */
  statesChanged(workloadNames: Iterable<string>): Scheduled {
    const out: Scheduled = { ready: [], reports: [], waits: [] };
    const candidates = new Set<string>();
    for (const name of workloadNames) for (const w of this.waitingOn.get(name) ?? []) candidates.add(w);
    for (const name of candidates) {
      const op = this.queue.get(name);
      if (op && this.canGo(op)) {
        this.dequeue(name);
        this.place(op, out, false);
      }
    }
    return out;
  }

  get waiting(): number {
    return this.queue.size;
  }

  /** Whether a waiting operation depends on this workload's state. */
  waitsOn(workloadName: string): boolean {
    return this.waitingOn.has(workloadName);
  }

  /** Runs the operation or puts it into the queue, reporting the waiting state when it is new there. */
  private place(op: WorkloadOperation, out: Scheduled, isNew: boolean): void {
    switch (op.kind) {
      case 'create':
        // swdd~agent-enqueues-unfulfilled-create~1
        if (this.addConditionsMet(op.spec)) out.ready.push(op);
        else this.enqueue(op, out, ExecutionState.waitingToStart(), op.spec, isNew);
        return;
      case 'delete':
        // swdd~agent-enqueues-unfulfilled-delete~1
        if (this.deleteConditionsMet(op.deleted)) out.ready.push(op);
        else this.enqueue(op, out, ExecutionState.waitingToStop(), op.deleted, isNew);
        return;
      case 'update':
        if (!this.deleteConditionsMet(op.deleted)) {
          // swdd~agent-enqueues-update-with-unfulfilled-delete~1
          this.enqueue(op, out, ExecutionState.waitingToStop(), op.deleted, isNew);
        } else if (this.addConditionsMet(op.spec)) {
          out.ready.push(op);
        } else {
          // swdd~agent-handles-update-with-fulfilled-delete~1
          out.ready.push({ kind: 'updateDeleteOnly', spec: op.spec, deleted: op.deleted });
          this.enqueue({ kind: 'create', spec: op.spec }, out, ExecutionState.waitingToStart(), op.spec, true);
        }
        return;
      case 'updateDeleteOnly':
        // swdd~agent-shall-not-enqueue-update-delete-only-workload-operation~1
        out.ready.push(op);
        return;
    }
  }

  private enqueue(op: Waiting, out: Scheduled, state: ExecutionState, about: WorkloadSpec | DeletedWorkload, report: boolean): void {
    const name = operationTarget(op);
    this.queue.set(name, op);
    for (const dependency of this.dependenciesOf(op)) {
      const waiters = this.waitingOn.get(dependency) ?? new Set<string>();
      waiters.add(name);
      this.waitingOn.set(dependency, waiters);
    }
    if (report) out.reports.push({ instanceName: about.instanceName, executionState: state });
    // `starts`: the workload it will create, told once, when it begins to wait (its image can be pulled meanwhile).
    const starts = report && 'spec' in op && op.spec ? op.spec : undefined;
    out.waits.push({ workloadName: name, waitsFor: this.unmet(op).join(', '), ...(starts ? { starts } : {}) });
  }

  /** The conditions of a waiting operation that are not met, in words: `db to be Running (now Pending(Starting))`. */
  private unmet(op: Waiting): string[] {
    const now = (name: string) => {
      const states = this.store.statesOf(name);
      return states.length > 0 ? `now ${states.map(formatState).join(', ')}` : 'no state yet';
    };
    if (op.kind === 'create')
      return Object.entries(op.spec.dependencies)
        .filter(([name, condition]) => !this.store.statesOf(name).some((s) => fulfillsAddCondition(s, condition)))
        .map(([name, condition]) => `${name} to be ${condition} (${now(name)})`);
    return Object.entries(op.deleted.dependencies)
      .filter(([name, condition]) => !this.store.statesOf(name).every((s) => fulfillsDeleteCondition(s, condition)))
      .map(([name, condition]) => `${name} to be ${condition === 'Running' ? 'Running' : 'neither pending nor running'} (${now(name)})`);
  }

  private dequeue(name: string): Waiting | undefined {
    const op = this.queue.get(name);
    if (!op) return undefined;
    this.queue.delete(name);
    for (const dependency of this.dependenciesOf(op)) {
      const waiters = this.waitingOn.get(dependency);
      waiters?.delete(name);
      if (waiters?.size === 0) this.waitingOn.delete(dependency);
    }
    return op;
  }

  private dependenciesOf(op: Waiting): string[] {
    return Object.keys(op.kind === 'create' ? op.spec.dependencies : op.deleted.dependencies);
  }

  private canGo(op: Waiting): boolean {
    return op.kind === 'create' ? this.addConditionsMet(op.spec) : this.deleteConditionsMet(op.deleted);
  }

  /** swdd~workload-ready-to-create-on-fulfilled-dependencies~1: some instance of each dependency meets its condition. */
  private addConditionsMet(spec: WorkloadSpec): boolean {
    return Object.entries(spec.dependencies).every(([name, condition]) => this.store.statesOf(name).some((s) => fulfillsAddCondition(s, condition)));
  }

  /** swdd~workload-ready-to-delete-on-fulfilled-dependencies~1: every instance of each dependent meets its condition. */
  private deleteConditionsMet(deleted: DeletedWorkload): boolean {
    return Object.entries(deleted.dependencies).every(([name, condition]) => this.store.statesOf(name).every((s) => fulfillsDeleteCondition(s, condition)));
  }
}

/**
 * Other agents' states at the door: each is stored (a workload added later may depend on it; `Removed` drops
 * it), and the names returned are those a waiting operation depends on: only they wake the scheduler.
 */
export function atTheDoor(store: WorkloadStateStore, scheduler: WorkloadScheduler, states: Iterable<WorkloadState>): string[] {
  return [...store.update(states)].filter((name) => scheduler.waitsOn(name));
}
