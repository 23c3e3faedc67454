// The RuntimeManager: turns the workload lists from the server into operations for the scheduler and,
// for workloads left by an earlier run of the agent, into immediate commands.
import { type Observable, type OperatorFunction, catchError, concatMap, defer, forkJoin, map, of } from 'rxjs';
import { ExecutionState, is } from '../lib/execution-state.js';
import type { Logger } from '../lib/logger.js';
import type { FromServer, WorkloadState } from '../lib/messages.js';
import type { ExistingWorkload, RuntimeConnector } from '../lib/runtime-connector.js';
import type { DeletedWorkload, WorkloadSpec } from '../lib/workload.js';
import { instanceNameProblem, sameInstance } from '../lib/workload.js';
import type { WorkloadOperation } from '../lib/workload-operation.js';
import type { WorkloadCommand } from '../lib/workload-loop.js';

export interface AddressedCommand {
  readonly workloadName: string;
  readonly command: WorkloadCommand;
}

/** What one message from the server amounts to. */
export interface Plan {
  readonly commands: AddressedCommand[];
  readonly operations: WorkloadOperation[];
  readonly reports: WorkloadState[];
}

export type WorkloadLists = Extract<FromServer, { kind: 'serverHello' | 'updateWorkload' }>;

export interface ManagerDeps {
  readonly agentName: string;
  readonly runtimes: ReadonlyMap<string, RuntimeConnector>;
  readonly log?: Logger;
}

const noDependents = (spec: WorkloadSpec): DeletedWorkload => ({ instanceName: spec.instanceName, dependencies: {} });

/**
 * swdd~agent-handles-update-workload-requests~1: one plan per message, in message order. The workloads
 * this agent manages (created, resumed, or waiting to be) are remembered between messages.
 */
export function manageWorkloads(deps: ManagerDeps): OperatorFunction<WorkloadLists, Plan> {
  return (messages$) =>
    defer(() => {
      const managed = new Map<string, WorkloadSpec>();
      return messages$.pipe(
        concatMap((message) =>
          message.kind === 'serverHello'
            ? listExisting(deps).pipe(map((existing) => planInitial(managed, message.added, existing, deps)))
            : of(planUpdate(managed, message.added, message.deleted, deps)),
        ),
      );
    });
}

/**
 * swdd~agent-existing-workloads-finds-list~1, swdd~agent-facade-forwards-list-reusable-workloads-call~1:
 * asks every runtime before anything starts; a runtime that fails to answer counts as having none.
 */
function listExisting(deps: ManagerDeps): Observable<ExistingWorkload[]> {
  const lists = [...deps.runtimes.values()].map((runtime) =>
    runtime.listReusableWorkloads(deps.agentName).pipe(
      catchError((err: unknown) => {
        deps.log?.warn(`Could not list the existing workloads of runtime '${runtime.name}': ${String(err)}`);
        return of([] as ExistingWorkload[]);
      }),
    ),
  );
  return lists.length === 0 ? of([]) : forkJoin(lists).pipe(map((all) => all.flat()));
}

/**
 * swdd~agent-initial-list-existing-workloads~1: the complete list of this agent's workloads, at the
 * start and after every reconnect.
 */
export function planInitial(
  managed: Map<string, WorkloadSpec>,
  added: readonly WorkloadSpec[],
  existing: readonly ExistingWorkload[],
  deps: ManagerDeps,
): Plan {
  const plan: Plan = { commands: [], operations: [], reports: [] };
  const wanted = new Map(added.map((spec) => [spec.instanceName.workloadName, spec]));
  const wasManaged = new Set(managed.keys());

  // Workloads managed since before a reconnect that the server no longer lists.
  for (const [name, spec] of managed) {
    if (!wanted.has(name)) {
      plan.operations.push({ kind: 'delete', deleted: noDependents(spec) });
      managed.delete(name);
    }
  }
  // swdd~agent-existing-workloads-delete-unneeded~2: found, not managed and not wanted.
  for (const e of existing) {
    const name = e.instanceName.workloadName;
    if (!wanted.has(name) && !wasManaged.has(name)) {
      plan.commands.push({ workloadName: name, command: { kind: 'removeExisting', existing: e, final: true } });
    }
  }
  // swdd~agent-skips-unknown-runtime~1: a workload of a runtime the agent does not have goes through its
  // operations like any other (dependencies first); its control loop reports it Pending(StartingFailed).
  for (const spec of refuseInvalid(added, managed, plan)) {
    const name = spec.instanceName.workloadName;
    const current = managed.get(name);
    managed.set(name, spec);
    if (current) {
      // Still managed from before a reconnect: keep it when unchanged.
      if (!sameInstance(current.instanceName, spec.instanceName)) {
        plan.operations.push({ kind: 'update', spec, deleted: noDependents(current) });
      }
      continue;
    }
    const found = existing.filter((e) => e.instanceName.workloadName === name);
    const same = found.filter((e) => sameInstance(e.instanceName, spec.instanceName));
    // swdd~agent-existing-workloads-resume-existing~2: running as configured: resumed, dependencies or not.
    const running = same.find((e) => is(e.state, 'Running'));
    // Exited well as configured: started again in place once its dependencies allow, through the normal
    // create (the released agent's reuse of unmodified workloads).
    const reusable = running ? undefined : same.find((e) => is(e.state, 'Succeeded') && deps.runtimes.get(e.runtime)?.startAgain);
    // swdd~agent-existing-workloads-replace-updated~4: anything else is deleted at once, and created anew
    // respecting the dependencies.
    for (const e of found) {
      if (e !== running && e !== reusable) plan.commands.push({ workloadName: name, command: { kind: 'removeExisting', existing: e, final: false } });
    }
    if (running) {
      plan.commands.push({ workloadName: name, command: { kind: 'resume', spec } });
    } else {
      if (reusable) plan.commands.push({ workloadName: name, command: { kind: 'adopt', existing: reusable } });
      // swdd~agent-existing-workloads-starts-new-if-not-found~1
      plan.operations.push({ kind: 'create', spec });
    }
  }
  return plan;
}

/**
 * The workloads whose instance names can be used; the others are refused alone, reported
 * Pending(StartingFailed) naming the rule, and no longer managed (what ran under the name is deleted).
 */
function refuseInvalid(added: readonly WorkloadSpec[], managed: Map<string, WorkloadSpec>, plan: Plan): WorkloadSpec[] {
  return added.filter((spec) => {
    const problem = instanceNameProblem(spec.instanceName);
    if (!problem) return true;
    const current = managed.get(spec.instanceName.workloadName);
    if (current) plan.operations.push({ kind: 'delete', deleted: noDependents(current) });
    managed.delete(spec.instanceName.workloadName);
    plan.reports.push({ instanceName: spec.instanceName, executionState: ExecutionState.startingFailed(problem) });
    return false;
  });
}

/** Handling subsequent UpdateWorkload messages. */
export function planUpdate(managed: Map<string, WorkloadSpec>, added: readonly WorkloadSpec[], deleted: readonly DeletedWorkload[], deps: ManagerDeps): Plan {
  const plan: Plan = { commands: [], operations: [], reports: [] };
  const deletedByName = new Map(deleted.map((d) => [d.instanceName.workloadName, d]));
  const addedNames = new Set(added.map((spec) => spec.instanceName.workloadName));

  // swdd~agent-handle-deleted-before-added-workloads~1
  for (const d of deleted) {
    const name = d.instanceName.workloadName;
    if (addedNames.has(name)) continue; // swdd~agent-updates-deleted-and-added-workloads~1: an update, below.
    if (managed.has(name)) {
      // swdd~agent-deletes-workload~1
      plan.operations.push({ kind: 'delete', deleted: d });
      managed.delete(name);
    } else {
      // Never run here (e.g. an unknown runtime): clear the state it was reported with.
      deps.log?.debug(`Deleted workload '${name}' is not managed by this agent.`);
      plan.reports.push({ instanceName: d.instanceName, executionState: ExecutionState.removed() });
    }
  }
  for (const spec of refuseInvalid(added, managed, plan)) {
    const name = spec.instanceName.workloadName;
    const current = managed.get(name);
    const old = deletedByName.get(name) ?? (current && noDependents(current));
    managed.set(name, spec);
    if (current && old) {
      // swdd~agent-updates-deleted-and-added-workloads~1, swdd~agent-update-on-add-known-workload~1
      plan.operations.push({ kind: 'update', spec, deleted: old });
    } else {
      // swdd~agent-added-creates-workload~1, swdd~agent-add-on-update-missing-workload~1
      plan.operations.push({ kind: 'create', spec });
    }
  }
  return plan;
}
