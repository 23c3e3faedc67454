// swdd~functions-required-by-runtime-connector~1: what the core needs from a runtime.
import type { Observable } from 'rxjs';
import type { ExecutionState } from './execution-state.js';
import type { LogsOptions } from './messages.js';
import type { WorkloadInstanceName, WorkloadSpec } from './workload.js';

/** A workload a previous run of this agent left on the runtime (a reusable workload). */
export interface ExistingWorkload<Id = unknown> {
  readonly instanceName: WorkloadInstanceName;
  readonly runtime: string;
  readonly id: Id;
  readonly state: ExecutionState;
}

export interface CreateOptions {
  /** Host folder holding the workload's Control Interface FIFOs, when it has one. */
  readonly controlInterfacePath?: string;
  /** Host files to bind-mount read-only: host path → mount point in the workload. */
  readonly fileMounts?: ReadonlyArray<{ readonly hostPath: string; readonly mountPoint: string }>;
}

/**
 * Every method returns a cold observable: nothing happens until it is subscribed, and
 * unsubscribing cancels it. Failures are errors whose message says what went wrong.
 * `Id` is the runtime's own handle of a workload (a container id, a kube workload's pods and manifest).
 */
export interface RuntimeConnector<Id = unknown> {
  readonly name: string;
  /** Workloads this agent started earlier on this runtime (swdd~agent-existing-workloads-finds-list~1). */
  listReusableWorkloads(agentName: string): Observable<readonly ExistingWorkload<Id>[]>;
  /** Creates and starts the workload; emits its id once, then completes. */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<Id>;
  /** Emits the id of the workload with this instance name, or undefined. */
  getWorkloadId(instanceName: WorkloadInstanceName): Observable<Id | undefined>;
  /** The state checker: the workload's execution state, each time it changes. */
  checkState(id: Id, spec: WorkloadSpec): Observable<ExecutionState>;
  /**
   * Starts an exited workload again in place, keeping its id (the 1.x agent's restart of a workload that
   * succeeded). Runtimes without it restart by deleting and creating.
   */
  startAgain?(id: Id, spec: WorkloadSpec): Observable<void>;
  /**
   * The images `next` needs that may not be on the node, read from the configs alone (pure): none when its options
   * never pull, when `current`, the instance it replaces, runs them from the same storage, or when its config cannot
   * be read (its create reports that). The one decision of what to fetch before a create.
   */
  imagesToFetch?(next: WorkloadSpec, current?: WorkloadSpec): readonly string[];
  /**
   * Has those `images` of `spec` on the node (pulled when not there, or when its options ask for a pull each time),
   * so that its create does not wait on the network; completes when they are there, fails with the pull's reason;
   * meanwhile it tells what it waits for, if anything (`waiting for a pull slot …`).
   */
  fetchImages?(spec: WorkloadSpec, images: readonly string[]): Observable<string>;
  /**
   * Stops the workload and keeps it (the control loop's answer to a failed health check: its restart policy
   * decides what follows). Runtimes without health checks need none.
   */
  stop?(id: Id): Observable<void>;
  /** Stops and removes what may run under the instance name when its id is not known (after a crash mid-create). */
  deleteByName?(instanceName: WorkloadInstanceName): Observable<void>;
  /** Stops and removes the workload; completes when it is gone. */
  deleteWorkload(id: Id): Observable<void>;
  /**
   * The workload's log lines (stdout and stderr); completes at their end unless following; unsubscribing
   * stops it. While `paused$` says true no more is read (the server connection cannot take more).
   */
  logs(id: Id, options: LogsOptions, paused$?: Observable<boolean>): Observable<string>;
}

/** A create that can never succeed as configured (e.g. a malformed runtime config): not retried. */
export class ConfigurationError extends Error {}
