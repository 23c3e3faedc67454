// The WorkloadControlLoop's interpreter: the loop's rules are a pure step (lib/workload-loop.ts); this runs the
// effects it asks for, one piece of work at a time and each to its end, and what a settled state follows (its
// workload's state, a wait, a pull) until the next command, feeding every outcome back into the step.
import { Observable, Subscription } from 'rxjs';
import { formatState } from '../lib/execution-state.js';
import type { Logger } from '../lib/logger.js';
import type { WorkloadState } from '../lib/messages.js';
import { type CrashLoopBackoff, KUBELET_BACKOFF } from '../lib/restart-policy.js';
import type { RunningWorkloads } from '../lib/running-workloads.js';
import {
  type Effect,
  type Follow,
  IDLE,
  type LoopContext,
  type LoopInput,
  type LoopState,
  type Transition,
  type WorkloadCommand,
  follows,
  isBusy,
  managed,
  step,
} from '../lib/workload-loop.js';
import type { Trace } from './trace.js';
import { type EffectDeps, followed, worked } from './workload-effects.js';

export interface ControlDeps extends EffectDeps {
  /** A random fraction in [0, 1] for the jitter of create retries (the full backoff when not given). */
  readonly jitter?: () => number;
  /** Kept up to date with the workloads the loops have created (the log requests are resolved against it). */
  readonly running?: RunningWorkloads;
  /** How restarts of a workload that keeps exiting are spaced (kubelet's when not given). */
  readonly backoff?: CrashLoopBackoff;
  /** --debug: the loops' commands and steps are traced as `workload.loop`. */
  readonly trace?: Trace;
  /** An update first has its new image on the node while the old instance runs (the released agent stops it first). */
  readonly pullAhead?: boolean;
  readonly log?: Logger;
}

/**
 * swdd~agent-create-workload~2, swdd~agent-resume-workload~2: one loop per workload, fed by `commands$`.
 * Each command's work runs to its end before the next command is taken; what a settled state follows lasts
 * until the next command arrives.
 */
export function controlWorkload(commands$: Observable<WorkloadCommand>, deps: ControlDeps, name = ''): Observable<WorkloadState> {
  return new Observable<WorkloadState>((subscriber) => {
    const loop = new Interpreter(
      deps,
      name,
      (state) => subscriber.next(state),
      () => subscriber.complete(),
    );
    const commands = commands$.subscribe({ next: (command) => loop.take(command), error: (err: unknown) => subscriber.error(err) });
    return () => {
      commands.unsubscribe();
      loop.stop();
    };
  });
}

/** An input, with the run of the effect or follow that gave it (an outcome of one that has ended since is dropped). */
interface Queued {
  readonly input: LoopInput;
  readonly from?: object;
}

/** Runs one loop: its state, the commands that wait for it, the work under way and what its state follows. */
class Interpreter {
  private state: LoopState = IDLE;
  private readonly commands: WorkloadCommand[] = [];
  private readonly inputs: Queued[] = [];
  /** Everything the loop runs (work, overtaken work still under way, follows): ended at once by stop(). */
  private readonly all = new Subscription();
  /** The busy state's work, and the settled state's follows by key. */
  private work?: { readonly token: object; readonly subscription: Subscription };
  private readonly following = new Map<string, { readonly token: object; subscription?: Subscription }>();
  /** The tokens of the follows under way: an outcome of one is taken, of one that ended dropped. */
  private readonly liveFollows = new Set<object>();
  private stepping = false;
  private ended = false;
  private readonly context: LoopContext;
  private readonly now: () => number;

  constructor(
    private readonly deps: ControlDeps,
    private readonly name: string,
    private readonly report: (state: WorkloadState) => void,
    private readonly end: () => void,
  ) {
    this.context = { runtimes: deps.runtimes, backoff: deps.backoff ?? KUBELET_BACKOFF, pullAhead: deps.pullAhead ?? false };
    this.now = () => deps.scheduler.now();
  }

  take(command: WorkloadCommand): void {
    this.commands.push(command);
    this.run();
  }

  stop(): void {
    this.ended = true;
    this.all.unsubscribe();
    this.following.clear();
    this.liveFollows.clear();
  }

  /** Steps through what is there to take, one input at a time (an outcome that comes during a step waits its turn). */
  private run(): void {
    if (this.stepping) return;
    this.stepping = true;
    try {
      for (let next = this.next(); next && !this.ended; next = this.next()) this.apply(next);
    } finally {
      this.stepping = false;
    }
  }

  /** The next input: an outcome first; a command once the loop is settled (what its state followed ends then). */
  private next(): LoopInput | undefined {
    while (this.inputs.length > 0) {
      const { input, from } = this.inputs.shift()!;
      if (from === undefined || from === this.work?.token || this.liveFollows.has(from)) return input;
    }
    if (isBusy(this.state) || this.commands.length === 0) return undefined;
    this.follow([]);
    return { kind: 'command', command: this.commands.shift()! };
  }

  private apply(input: LoopInput): void {
    this.trace(() => (input.kind === 'command' ? `command ${input.command.kind}` : `hears ${input.kind}`));
    const before = this.state;
    const t: Transition = step(before, input, { at: this.now(), jitter: this.deps.jitter?.() ?? 1 }, this.context);
    for (const state of t.reports) {
      this.trace(() => `reports ${formatState(state.executionState)}`);
      this.report(state);
    }
    if (t.end) {
      this.trace(() => 'ends');
      this.stop();
      this.end();
      return;
    }
    this.state = t.state;
    if (t.state !== before) {
      this.trace(() => `is ${t.state.kind}${'id' in t.state && t.state.id !== undefined ? ` (${String(t.state.id).slice(0, 12)})` : ''}`);
      this.noteRunning(before, t.state);
    }
    for (const effect of t.effects) this.start(effect);
    // A settled state follows its workload once no command waits (a command ended what it followed, even one
    // that left the state as it was); a busy one follows nothing.
    const changed = t.state !== before || input.kind === 'command';
    if (changed && (isBusy(t.state) || this.commands.length === 0)) this.follow(isBusy(t.state) ? [] : follows(t.state));
  }

  /** Keeps what runs in step with `wanted`: a follow whose key stays goes on, the others end, new ones start. */
  private follow(wanted: readonly Follow[]): void {
    const keys = new Set(wanted.map((f) => f.key));
    for (const [key, { token, subscription }] of this.following) {
      if (keys.has(key)) continue;
      subscription?.unsubscribe();
      this.following.delete(key);
      this.liveFollows.delete(token);
    }
    for (const f of wanted) {
      if (this.following.has(f.key)) continue;
      // Known before it is subscribed: an outcome it gives at once is one of a live follow.
      const entry: { readonly token: object; subscription?: Subscription } = { token: {} };
      this.following.set(f.key, entry);
      this.liveFollows.add(entry.token);
      entry.subscription = this.outcomes(followed(f, this.deps), entry.token);
    }
  }

  private start(effect: Effect): void {
    if (effect.kind === 'warn') {
      this.deps.log?.warn(effect.text);
      return;
    }
    const token = {};
    // Work still under way runs on until the loop stops, its outcome no longer heard: an unhealthy workload's stop
    // that a command overtook.
    this.work = { token, subscription: this.outcomes(worked(effect, this.deps), token) };
  }

  /** Subscribes to what an effect or follow comes out with: each outcome waits its turn to be stepped. */
  private outcomes(outcome$: Observable<LoopInput>, from: object): Subscription {
    const subscription = outcome$.subscribe((input) => {
      this.inputs.push({ input, from });
      this.run();
    });
    // Held until it ends (an ended one leaves `all` by itself), so that stop() ends it too.
    this.all.add(subscription);
    return subscription;
  }

  /** Keeps `running` in step with the workload the loop has on its runtime. */
  private noteRunning(from: LoopState, to: LoopState): void {
    const [was, is] = [managed(from), managed(to)];
    if (was === is) return;
    if (was) this.deps.running?.delete(was.spec.instanceName);
    if (is) this.deps.running?.set(is.spec.instanceName, { runtime: this.deps.runtimes.get(is.spec.runtime)!, id: is.id });
  }

  /** --debug: the loop's inputs and steps, in words, as `workload.loop`. */
  private trace(words: () => string): void {
    if (this.deps.trace?.enabled('workload.loop')) this.deps.trace.note('workload.loop', `${this.name}: ${words()}`);
  }
}
