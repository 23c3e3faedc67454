// The agent's workload core: from the server's messages to the states of its own workloads.
import {
  EMPTY,
  Observable,
  type OperatorFunction,
  Subject,
  catchError,
  defer,
  filter,
  groupBy,
  ignoreElements,
  map,
  merge,
  mergeMap,
  share,
  takeUntil,
  tap,
} from 'rxjs';
import type { FromServer, WorkloadState } from '../lib/messages.js';
import { spread } from '../lib/spread.js';
import { type Scheduled, WorkloadScheduler, atTheDoor } from '../lib/scheduler.js';
import { WorkloadStateStore } from '../lib/state-store.js';
import type { WorkloadOperation } from '../lib/workload-operation.js';
import { operationTarget } from '../lib/workload-operation.js';
import { type WorkloadCommand, endsLoop } from '../lib/workload-loop.js';
import { type ControlDeps, controlWorkload } from './control-workload.js';
import { applyHysteresis } from './hysteresis.js';
import { trampoline } from './trampoline.js';
import { type AddressedCommand, type ManagerDeps, type Plan, type WorkloadLists, manageWorkloads } from './manage-workloads.js';

export type WorkloadDeps = ManagerDeps & ControlDeps;

type Event = { readonly plan: Plan } | { readonly states: readonly WorkloadState[] } | { readonly changed: readonly string[] };
interface Decision {
  readonly commands: readonly AddressedCommand[];
  readonly reports: readonly WorkloadState[];
  readonly waits: Scheduled['waits'];
}

/**
 * Emits every change of the execution states of the agent's own workloads, after hysteresis
 * (swdd~agent-sends-workload-states-of-its-workloads-to-server~2).
 */
export function runWorkloads(fromServer$: Observable<FromServer>, deps: WorkloadDeps): Observable<readonly WorkloadState[]> {
  return defer(() => {
    const store = new WorkloadStateStore();
    const scheduler = new WorkloadScheduler(store);
    const ownStates$ = new Subject<readonly WorkloadState[]>();
    const messages$ = fromServer$.pipe(share());
    const plans$ = messages$.pipe(
      filter((m): m is WorkloadLists => m.kind === 'serverHello' || m.kind === 'updateWorkload'),
      manageWorkloads(deps),
    );
    const othersChanged$ = othersChanged(messages$, store, scheduler, deps.agentName);
    const decisions$ = merge(plans$.pipe(map((plan): Event => ({ plan }))), othersChanged$, ownStates$.pipe(map((states): Event => ({ states })))).pipe(
      // A decision is dispatched completely before the decisions it causes are taken.
      trampoline(),
      map((event) => decide(store, scheduler, event)),
      share(),
    );
    const loopStates$ = decisions$.pipe(
      spread((d) => d.commands),
      runControlLoops(deps),
    );
    const states$ = merge(decisions$.pipe(map((d) => d.reports)), loopStates$.pipe(map((s) => [s]))).pipe(applyHysteresis(), share());
    return merge(
      states$,
      // swdd~agent-manager-receives-workload-states-of-its-workloads~1: own states feed the scheduler too,
      // after they went out, so that a state is always reported before the states it causes.
      states$.pipe(
        tap((states) => ownStates$.next(states)),
        ignoreElements(),
      ),
      tracedDecisions(decisions$, deps.trace),
      deps.pullAhead ? decisions$.pipe(pullWhileWaiting(deps)) : EMPTY,
    );
  });
}

/**
 * swdd~agent-handles-update-workload-state-requests~1: other agents' states, at the door: each is kept (a workload
 * added later may depend on it; `Removed` drops it) and only a change that a waiting workload depends on wakes the
 * scheduler. Our own come straight from our loops, so the server's echo of them (possibly older) is not needed.
 */
const othersChanged = (messages$: Observable<FromServer>, store: WorkloadStateStore, scheduler: WorkloadScheduler, agentName: string): Observable<Event> =>
  messages$.pipe(
    filter((m): m is FromServer & { kind: 'updateWorkloadState' } => m.kind === 'updateWorkloadState'),
    map((m) =>
      atTheDoor(
        store,
        scheduler,
        m.states.filter((s) => s.instanceName.agentName !== agentName),
      ),
    ),
    filter((waited) => waited.length > 0),
    map((changed): Event => ({ changed })),
  );

/** --debug: each decision of the scheduler, in words. */
const tracedDecisions = (decisions$: Observable<Decision>, trace: WorkloadDeps['trace']): Observable<never> =>
  trace?.enabled('workload.scheduler')
    ? decisions$.pipe(
        tap((d) => {
          for (const c of d.commands) trace.note('workload.scheduler', `${c.workloadName}: ${c.command.kind}`);
          for (const w of d.waits) trace.note('workload.scheduler', `${w.workloadName} waits for ${w.waitsFor}`);
        }),
        ignoreElements(),
      )
    : EMPTY;

/**
 * The images of workloads that begin to wait for their dependencies, pulled meanwhile, so that each starts at
 * once when they are met (its create waits for a pull still under way). A pull that fails is left to the create.
 */
function pullWhileWaiting({ runtimes, log }: WorkloadDeps): OperatorFunction<Decision, never> {
  return (decisions$) =>
    decisions$.pipe(
      spread((d) => d.waits.flatMap((w) => (w.starts ? [w.starts] : []))),
      mergeMap((spec) => {
        const runtime = runtimes.get(spec.runtime);
        const images = runtime?.imagesToFetch?.(spec) ?? [];
        return (images.length > 0 ? (runtime?.fetchImages?.(spec, images) ?? EMPTY) : EMPTY).pipe(
          ignoreElements(),
          catchError((err: unknown): Observable<never> => {
            log?.warn(`The image of '${spec.instanceName.workloadName}' could not be pulled while it waits: ${String(err)}; its create pulls it.`);
            return EMPTY;
          }),
        );
      }),
    );
}

/** What the WorkloadStateStore and the WorkloadScheduler decide on a plan, on own states, or on others' states (already stored) that were waited for. */
function decide(store: WorkloadStateStore, scheduler: WorkloadScheduler, event: Event): Decision {
  if ('plan' in event) {
    const scheduled = scheduler.schedule(event.plan.operations);
    return {
      commands: [...event.plan.commands, ...scheduled.ready.map(toCommand)],
      reports: [...event.plan.reports, ...scheduled.reports],
      waits: scheduled.waits,
    };
  }
  const scheduled = scheduler.statesChanged('changed' in event ? event.changed : store.update(event.states));
  return { commands: scheduled.ready.map(toCommand), reports: scheduled.reports, waits: scheduled.waits };
}

/** swdd~agent-executes-create-workload-operation~1 … swdd~agent-executes-update-delete-only-workload-operation~1 */
export function toCommand(op: WorkloadOperation): AddressedCommand {
  const command: WorkloadCommand = (() => {
    switch (op.kind) {
      case 'create':
        return { kind: 'create', spec: op.spec };
      case 'update':
        return { kind: 'update', spec: op.spec };
      case 'updateDeleteOnly':
        return { kind: 'update' };
      case 'delete':
        return { kind: 'delete', instanceName: op.deleted.instanceName };
    }
  })();
  return { workloadName: operationTarget(op), command };
}

/**
 * One control loop per workload name; a loop's group closes with the command that ends it. Unsubscribed, it lets go
 * of its commands at once: groupBy keeps its source while a group's duration still listens, so the source is ended
 * first.
 */
export function runControlLoops(deps: ControlDeps): OperatorFunction<AddressedCommand, WorkloadState> {
  return (commands$) =>
    new Observable<WorkloadState>((subscriber) => {
      const unsubscribed$ = new Subject<void>();
      const loops = commands$
        .pipe(
          takeUntil(unsubscribed$),
          groupBy((c) => c.workloadName, { duration: (group) => group.pipe(filter((c) => endsLoop(c.command))) }),
          mergeMap((group) => controlWorkload(group.pipe(map((c) => c.command)), deps, group.key)),
        )
        .subscribe(subscriber);
      return () => {
        unsubscribed$.next();
        loops.unsubscribe();
      };
    });
}
