// A workload's control loop as a pure step (streams/control-workload.ts interprets it): for each command or
// outcome (the types are lib/workload-loop-state.ts's), the next state, the states to report and the effects to
// run. Time comes in with each input; nothing here runs, waits or reads a clock.
import { ExecutionState, type HealthStatus, formatState } from './execution-state.js';
import type { WorkloadState } from './messages.js';
import { needsRestart, nextRestart } from './restart-policy.js';
import type { ExistingWorkload, RuntimeConnector } from './runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, sameInstance } from './workload.js';

import {
  type Afterwards,
  type Effect,
  type Follow,
  IDLE,
  type LoopContext,
  type LoopInput,
  type LoopState,
  type Moment,
  type Running,
  type Transition,
  type WorkloadCommand,
  createBackoffMs,
} from './workload-loop-state.js';

export * from './workload-loop-state.js';

const to = (state: LoopState, reports: readonly WorkloadState[] = [], effects: readonly Effect[] = [], end = false): Transition => ({
  state,
  reports,
  effects,
  end,
});
/** `t` with `reports` said first. */
const after = (reports: readonly WorkloadState[], t: Transition): Transition => ({ ...t, reports: [...reports, ...t.reports] });
const stateOf = (instanceName: WorkloadInstanceName, executionState: ExecutionState): WorkloadState => ({ instanceName, executionState });
const STARTING = 'Triggered at runtime.';
const starting = (spec: WorkloadSpec) => stateOf(spec.instanceName, ExecutionState.starting(STARTING));
/** swdd~agent-skips-unknown-runtime~2: a runtime the agent does not have (or has not enabled), in the released agent's words. */
const unknownRuntime = (spec: WorkloadSpec) => stateOf(spec.instanceName, ExecutionState.startingFailed('Unsupported Runtime'));
const PULL_NOTE = '(the old instance runs until the image is pulled)';

/**
 * swdd~agent-create-workload~2, swdd~agent-resume-workload~2: the loop's one step. Commands come only to a
 * settled state (the interpreter holds them while it is busy); outcomes come from the effects and follows of
 * the state they were started in.
 */
export function step(state: LoopState, input: LoopInput, now: Moment, context: LoopContext): Transition {
  const rules = new Rules(context, now);
  if (input.kind === 'command') return rules.command(state, input.command);
  return rules.outcome(state, input);
}

/** What a settled state follows: its workload's state, a wait, a pull. */
export function follows(state: LoopState): Follow[] {
  switch (state.kind) {
    case 'created':
      return [{ kind: 'watch', key: watchKey(state), running: state }];
    case 'fetching':
      return [
        { kind: 'watch', key: watchKey(state), running: state },
        state.retryInMs === undefined
          ? { kind: 'pull', key: `pull ${state.tries}`, spec: state.next, images: state.images }
          : { kind: 'wait', key: `pull wait ${state.tries}`, ms: state.retryInMs },
      ];
    case 'retrying':
      // swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1,
      // swdd~agent-workload-control-loop-exponential-backoff-retries~1
      return [{ kind: 'wait', key: `retry ${state.retries}`, ms: state.delayMs }];
    case 'backingOff':
      return [{ kind: 'wait', key: `restart ${state.shortRuns}`, ms: state.delayMs }];
    case 'refinding':
      return [{ kind: 'wait', key: `find ${state.tries}`, ms: state.delayMs }];
    default:
      return [];
  }
}

/** A watch goes on while the state has the same container; one of a fetching loop does not restart it. */
const watchKey = (state: LoopState & Running) => `watch ${state.kind === 'created' ? 'restarts' : 'only'}`;

/** The workload a state has on its runtime (for the log requests and the metrics), if any. */
export function managed(state: LoopState): Running | undefined {
  switch (state.kind) {
    case 'created':
    case 'fetching':
      return state;
    case 'removing':
    case 'startingAgain':
      return state.running;
    default:
      return undefined;
  }
}

class Rules {
  constructor(
    private readonly context: LoopContext,
    private readonly now: Moment,
  ) {}

  /** What the step may ask of a runtime: what it can do, and which images a config needs (pure reads). */
  private runtimeOf(spec: WorkloadSpec): RuntimeConnector | undefined {
    return this.context.runtimes.get(spec.runtime);
  }

  command(state: LoopState, command: WorkloadCommand): Transition {
    switch (command.kind) {
      case 'create':
        return this.create(state, command.spec, 0);
      case 'resume':
        return this.resume(command.spec);
      case 'update':
        return this.update(state, command.spec);
      case 'delete':
        return this.delete(state, command.instanceName);
      case 'removeExisting':
        return this.removeExisting(command.existing, command.final ? { kind: 'end' } : { kind: 'back', to: state });
      case 'adopt':
        return to({ kind: 'adopted', existing: command.existing });
    }
  }

  outcome(state: LoopState, input: Exclude<LoopInput, { kind: 'command' }>): Transition {
    switch (input.kind) {
      case 'created':
        return state.kind === 'creating' ? this.created(state.spec, input.id, state.shortRuns) : to(state);
      case 'createFailed':
        return state.kind === 'creating' ? this.createFailed(state, input.cause, input.refused) : to(state);
      case 'startedAgain':
        return state.kind === 'startingAgain' ? this.created(state.spec, state.id, state.shortRuns) : to(state);
      case 'startAgainFailed':
        if (state.kind !== 'startingAgain') return to(state);
        return state.instead.kind === 'removeExisting'
          ? this.removeExisting(state.instead.existing, { kind: 'attempt', spec: state.spec, shortRuns: state.shortRuns })
          : this.replace({ ...state.instead.current, kind: 'created' }, state.spec, state.shortRuns);
      case 'removed':
        return state.kind === 'removing' ? this.removed(state, input.failure) : to(state);
      case 'existingRemoved':
        return state.kind === 'removingExisting' ? this.existingRemoved(state, input.failure) : to(state);
      case 'found':
        return state.kind === 'finding' ? this.found(state, input) : to(state);
      case 'seen':
        return state.kind === 'created' || state.kind === 'fetching' ? this.seen(state, input.state) : to(state);
      case 'stoppedUnhealthy':
        return state.kind === 'created' && needsRestart(state.spec.restartPolicy, input.state) ? this.exited(state, input.state) : to(state);
      case 'watchFailed':
        return state.kind === 'created' || state.kind === 'fetching'
          ? to(state, [stateOf(state.spec.instanceName, ExecutionState.unknown('The state checker failed.'))])
          : to(state);
      case 'waited':
        return this.waited(state);
      case 'pullNote':
        return state.kind === 'fetching' ? to(state, [stateOf(state.next.instanceName, ExecutionState.starting(`${input.note} ${PULL_NOTE}`))]) : to(state);
      case 'pulled':
        return state.kind === 'fetching' ? this.replace(state, state.next) : to(state);
      case 'pullFailed':
        return state.kind === 'fetching' ? this.pullFailed(state, input.cause) : to(state);
    }
  }

  /** Created (or started again) under `id` just now. */
  private created(spec: WorkloadSpec, id: unknown, shortRuns: number): Transition {
    return to({ kind: 'created', spec, id, startedAt: this.now.at, shortRuns });
  }

  /**
   * swdd~agent-workload-control-loop-executes-create~4, swdd~agent-skips-unknown-runtime~1: a kept workload
   * of an earlier run with the same config is started again in place (a new one is created when that
   * fails); one of another config is deleted first.
   */
  private create(state: LoopState, spec: WorkloadSpec, shortRuns: number): Transition {
    const reusable = state.kind === 'adopted' ? state.existing : undefined;
    if (!reusable) return after([starting(spec)], this.attempt(spec, 0, shortRuns));
    if (!this.runtimeOf(spec)?.startAgain || !sameInstance(reusable.instanceName, spec.instanceName)) {
      return this.removeExisting(reusable, { kind: 'attempt', spec, shortRuns });
    }
    return to(
      { kind: 'startingAgain', spec, id: reusable.id, shortRuns, instead: { kind: 'removeExisting', existing: reusable } },
      [starting(spec)],
      [{ kind: 'startAgain', spec, id: reusable.id, prepare: true }],
    );
  }

  /**
   * Create attempt `retries + 1`. swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1,
   * swdd~agent-workload-control-loop-handles-failed-workload-creation~1,
   * swdd~agent-workload-control-loop-aborts-create-upon-workload-files-creation-error~1: whatever failed (the host
   * side, the runtime config, the runtime), the workload's files go (the effect's part); a failure is reported
   * Pending(Starting) "Retry <n>: <cause>" and retried; a config the runtime refuses is not.
   */
  private attempt(spec: WorkloadSpec, retries: number, shortRuns: number): Transition {
    if (!this.context.runtimes.has(spec.runtime)) return to({ kind: 'absent', spec }, [unknownRuntime(spec)]);
    return to({ kind: 'creating', spec, retries, shortRuns }, [], [{ kind: 'create', spec }]);
  }

  private createFailed({ spec, retries, shortRuns }: LoopState & { kind: 'creating' }, cause: string, refused: boolean): Transition {
    if (refused) return to({ kind: 'absent', spec }, [stateOf(spec.instanceName, ExecutionState.startingFailed(cause))]);
    const delayMs = createBackoffMs(retries, this.now.jitter);
    return to({ kind: 'retrying', spec, retries, shortRuns, delayMs }, [stateOf(spec.instanceName, ExecutionState.starting(`Retry ${retries + 1}: ${cause}`))]);
  }

  /** swdd~agent-workload-control-loop-executes-resume~1: a resumed workload gets a new Control Interface instance on its existing pipes. */
  private resume(spec: WorkloadSpec): Transition {
    if (!this.context.runtimes.has(spec.runtime)) return to({ kind: 'absent', spec }, [unknownRuntime(spec)]);
    return this.find(spec, 0);
  }

  private find(spec: WorkloadSpec, tries: number): Transition {
    return to({ kind: 'finding', spec, tries }, [], [{ kind: 'find', spec }]);
  }

  /**
   * A workload is lost only when the runtime says it is not there; a runtime that could not say (its list
   * failed or could not be read) is asked again after the create back-off, and nothing is reported meanwhile.
   */
  private found({ spec, tries }: LoopState & { kind: 'finding' }, { id, failure }: { id?: unknown; failure?: string }): Transition {
    if (failure !== undefined) {
      const delayMs = createBackoffMs(tries, this.now.jitter);
      const text = `Could not look for the workload '${spec.instanceName.id}' to resume (${failure}); asking again in ${delayMs} ms.`;
      return to({ kind: 'refinding', spec, tries: tries + 1, delayMs }, [], [{ kind: 'warn', text }]);
    }
    if (id === undefined) return to({ kind: 'absent', spec }, [stateOf(spec.instanceName, ExecutionState.lost('The workload to resume was not found.'))]);
    return this.created(spec, id, 0);
  }

  /**
   * swdd~agent-workload-control-loop-executes-update~3, swdd~agent-workload-control-loop-executes-update-delete-only~1,
   * swdd~agent-workload-control-loop-reset-backoff-on-update~1,
   * swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2,
   * swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1: no create while the old one is still there.
   * An update starts the crash-loop back-off anew too. With pull ahead, a running workload's update has its
   * images first (its runtime reads from the configs which ones may not be there).
   */
  private update(state: LoopState, next: WorkloadSpec | undefined): Transition {
    const running = state.kind === 'created' || state.kind === 'fetching' ? state : undefined;
    const images = next && running && this.context.pullAhead ? (this.runtimeOf(next)?.imagesToFetch?.(next, running.spec) ?? []) : [];
    const abandoned = this.abandoned(state, next);
    if (next && running && images.length > 0) {
      const { spec, id, startedAt, shortRuns } = running;
      return to({ kind: 'fetching', spec, id, startedAt, shortRuns, next, images, tries: 0 }, abandoned);
    }
    return after(abandoned, this.replace(state, next));
  }

  /**
   * The update whose image was being pulled, given up for another update or a delete: its instance is reported
   * Removed, as the released agent reports an update's instance it removes, so that no server keeps its state.
   */
  private abandoned(state: LoopState, next?: WorkloadSpec): WorkloadState[] {
    if (state.kind !== 'fetching' || (next && sameInstance(next.instanceName, state.next.instanceName))) return [];
    return [stateOf(state.next.instanceName, ExecutionState.removed())];
  }

  /**
   * A pull of an update's new image that failed: logged and reported on the new instance as the released agent
   * reports a failed create, and tried again after the create back-off.
   */
  private pullFailed(state: LoopState & { kind: 'fetching' }, cause: string): Transition {
    const tries = state.tries + 1;
    const name = state.next.instanceName.workloadName;
    return to(
      { ...state, tries, retryInMs: createBackoffMs(state.tries, this.now.jitter) },
      [stateOf(state.next.instanceName, ExecutionState.starting(`Retry ${tries}: ${cause} ${PULL_NOTE}`))],
      [{ kind: 'warn', text: `The update of '${name}' waits, its old instance running: ${cause} (try ${tries}; the next after a back-off).` }],
    );
  }

  /** The current workload removed, then `next` (if any) created. */
  private replace(state: LoopState, next: WorkloadSpec | undefined, shortRuns = 0): Transition {
    return this.removeCurrent(state, next ? { kind: 'attempt', spec: next, shortRuns } : { kind: 'back', to: IDLE });
  }

  /**
   * swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-workload-control-loop-delete-broken-allowed~1:
   * a delete that fails is reported once (Stopping(DeleteFailed)) and the loop waits for the next command.
   */
  private delete(state: LoopState, instanceName: WorkloadInstanceName): Transition {
    if (state.kind === 'adopted') return this.removeExisting(state.existing, { kind: 'end' });
    // Never created (its create was still waiting): say so, so its pending state goes away.
    if (state.kind === 'idle') return to(state, [stateOf(instanceName, ExecutionState.removed())], [], true);
    return after(this.abandoned(state), this.removeCurrent(state, { kind: 'end' }));
  }

  /**
   * Deletes the managed workload (when there is one) and releases its host side, then `afterwards`. On failure the
   * loop keeps the workload so the next command can try again
   * (swdd~agent-workload-control-loop-delete-failed-allows-retry~1).
   * swdd~agent-workload-control-loop-update-broken-allowed~1: with no id nothing is known on the
   * runtime; what may run under the name all the same (a create cut short) goes by name.
   */
  private removeCurrent(state: LoopState, afterwards: Afterwards): Transition {
    if (state.kind === 'idle' || state.kind === 'adopted') return this.go(state, afterwards);
    if (!('spec' in state)) return this.go(state, afterwards);
    const { spec } = state;
    const id = state.kind === 'created' || state.kind === 'backingOff' || state.kind === 'fetching' || state.kind === 'deleteFailed' ? state.id : undefined;
    return to(
      { kind: 'removing', spec, id, afterwards, running: managed(state) },
      [stateOf(spec.instanceName, ExecutionState.stoppingRequested())],
      [id === undefined ? { kind: 'removeByName', spec } : { kind: 'remove', spec, id }],
    );
  }

  private removed({ spec, id, afterwards }: LoopState & { kind: 'removing' }, failure: string | undefined): Transition {
    if (failure !== undefined) return to({ kind: 'deleteFailed', spec, id }, [stateOf(spec.instanceName, ExecutionState.deleteFailed(failure))]);
    return after([stateOf(spec.instanceName, ExecutionState.removed())], this.go(IDLE, afterwards));
  }

  /** swdd~agent-delete-old-workload~3: a workload of an earlier run, deleted by its id, then `afterwards`. */
  private removeExisting(existing: ExistingWorkload, afterwards: Afterwards): Transition {
    const stopping = stateOf(existing.instanceName, ExecutionState.stoppingRequested());
    if (!this.context.runtimes.has(existing.runtime)) {
      return after([stopping, stateOf(existing.instanceName, ExecutionState.deleteFailed(`Unknown runtime '${existing.runtime}'`))], this.go(IDLE, afterwards));
    }
    return to({ kind: 'removingExisting', existing, afterwards }, [stopping], [{ kind: 'removeExisting', existing }]);
  }

  private existingRemoved({ existing, afterwards }: LoopState & { kind: 'removingExisting' }, failure: string | undefined): Transition {
    const outcome = failure === undefined ? ExecutionState.removed() : ExecutionState.deleteFailed(failure);
    return after([stateOf(existing.instanceName, outcome)], this.go(IDLE, afterwards));
  }

  /** What follows a removal: the end, a new create, or the state it came from (`from` when there is none to go back to). */
  private go(from: LoopState, afterwards: Afterwards): Transition {
    switch (afterwards.kind) {
      case 'end':
        return to(from, [], [], true);
      case 'attempt':
        return this.create(from, afterwards.spec, afterwards.shortRuns);
      case 'back':
        return to(afterwards.to === IDLE ? from : afterwards.to);
    }
  }

  /**
   * swdd~workload-control-loop-receives-workload-states~1, swdd~workload-control-loop-checks-workload-state-validity~1,
   * swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2, swdd~workload-control-loop-handles-workload-restarts~2:
   * each state is reported; an ended one restarts by the policy (not while an update's image is pulled).
   * rx~health-unhealthy-fails-and-stops~1: an unhealthy workload is stopped (and kept) before its restart
   * policy acts, so that it does not serve while a restart waits: its restart comes with `stoppedUnhealthy`.
   */
  private seen(state: LoopState & Running & { kind: 'created' | 'fetching' }, seen: ExecutionState): Transition {
    const reported = [stateOf(state.spec.instanceName, seen)];
    if (isUnhealthy(seen.health) && this.runtimeOf(state.spec)?.stop !== undefined)
      return to(state, reported, [{ kind: 'stop', spec: state.spec, id: state.id, state: seen }]);
    if (state.kind !== 'created' || !needsRestart(state.spec.restartPolicy, seen)) return to(state, reported);
    return after(reported, this.exited(state, seen));
  }

  /**
   * The workload ended and its policy restarts it: at once after a long run, else after the crash-loop
   * back-off, which the state tells while it lasts (an update or a delete ends it at once).
   */
  private exited(state: Running & { kind: 'created' }, exit: ExecutionState): Transition {
    const succeeded = exit.state === 'Succeeded';
    const { shortRuns, delayMs } = nextRestart(state.shortRuns, this.now.at - state.startedAt, this.context.backoff);
    if (delayMs === 0) return this.restart({ ...state, shortRuns }, succeeded);
    const last = succeeded ? "Exit code: '0'" : exit.additionalInfo || formatState(exit);
    const info = `Restart ${shortRuns} of a workload that keeps exiting (last: ${last}), in ${Math.round(delayMs / 1000)} s (crash-loop back-off).`;
    return to({ ...state, kind: 'backingOff', shortRuns, succeeded, delayMs }, [stateOf(state.spec.instanceName, ExecutionState.waitingToStart(info))]);
  }

  private waited(state: LoopState): Transition {
    switch (state.kind) {
      case 'retrying':
        // swdd~agent-workload-control-loop-executes-retry~1: retries have no limit; only another command ends them.
        return this.attempt(state.spec, state.retries + 1, state.shortRuns);
      case 'backingOff':
        return this.restart(state, state.succeeded);
      case 'fetching':
        return to({ ...state, retryInMs: undefined });
      case 'refinding':
        return this.find(state.spec, state.tries);
      default:
        return to(state);
    }
  }

  /**
   * swdd~workload-control-loop-restarts-workloads-using-update~1: a restart is an update to the same
   * config, and reported as one (Stopping(RequestedAtRuntime), Removed, Pending(Starting), …), so a server
   * sees it happen. A workload that succeeded is started again in place where its runtime can (as the
   * 1.x agent does), and re-created when that fails.
   */
  private restart(state: Running & { kind: 'created' | 'backingOff' }, succeeded: boolean): Transition {
    const { spec, id, shortRuns } = state;
    const current: Running = { spec, id, startedAt: state.startedAt, shortRuns };
    if (!succeeded || !this.runtimeOf(spec)?.startAgain) return this.replace({ ...current, kind: 'created' }, spec, shortRuns);
    return to(
      { kind: 'startingAgain', spec, id, shortRuns, instead: { kind: 'replace', current }, running: state.kind === 'created' ? state : undefined },
      [starting(spec)],
      [{ kind: 'startAgain', spec, id, prepare: false }],
    );
  }
}

const isUnhealthy = (health: HealthStatus | undefined) => health === 'unhealthy';
