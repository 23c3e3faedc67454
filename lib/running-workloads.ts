// The workloads this agent runs now, as its control loops know them: what a log request is resolved
// against, so that serving logs asks the runtime nothing but the logs themselves.
import type { RuntimeConnector } from './runtime-connector.js';
import { type WorkloadInstanceName, instanceKey } from './workload.js';

/** A workload instance this agent runs: the runtime that runs it and the runtime's own id of it. */
export interface Running {
  readonly runtime: RuntimeConnector;
  readonly id: unknown;
}

export class RunningWorkloads {
  private readonly byInstance = new Map<string, { readonly instanceName: WorkloadInstanceName; readonly running: Running }>();

  find(instanceName: WorkloadInstanceName): Running | undefined {
    return this.byInstance.get(instanceKey(instanceName))?.running;
  }

  /** The first running instance `test` accepts (for the metrics: which workload a pod belongs to). */
  findWhere(test: (running: Running) => boolean): WorkloadInstanceName | undefined {
    for (const { instanceName, running } of this.byInstance.values()) if (test(running)) return instanceName;
    return undefined;
  }

  set(instanceName: WorkloadInstanceName, running: Running): void {
    this.byInstance.set(instanceKey(instanceName), { instanceName, running });
  }

  delete(instanceName: WorkloadInstanceName): void {
    this.byInstance.delete(instanceKey(instanceName));
  }
}
