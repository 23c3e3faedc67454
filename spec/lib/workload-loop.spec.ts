// The control loop's step (lib/workload-loop.ts) as tables: a state and an input → the next state, the states
// reported, the effects asked for and what the new state follows. The marbles of spec/streams/control-workload.spec.ts
// keep what is about order and cancellation.
import { expect } from 'chai';
import { EMPTY } from 'rxjs';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import type { ExistingWorkload, RuntimeConnector } from '../../lib/runtime-connector.js';
import {
  IDLE,
  type LoopContext,
  type LoopInput,
  type LoopState,
  type Running,
  type Transition,
  createBackoffMs,
  follows,
  isBusy,
  managed,
  step,
} from '../../lib/workload-loop.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { workload } from '../../scripts/harness/fixtures.js';

const runtime = new FakeRuntime({ fetchImage: () => EMPTY, stop: () => EMPTY, startAgain: () => EMPTY });
const context: LoopContext = {
  runtimes: new Map([['fake', runtime]]),
  backoff: { firstDelayMs: 10_000, maxDelayMs: 300_000, resetAfterMs: 600_000 },
  pullAhead: true,
};
const now = { at: 100_000, jitter: 0.5 };
const spec = workload('nginx', { restartPolicy: 'Always' });
const next = workload('nginx', { config: 'image: nginx:2' });
const running = (over: Partial<Running> = {}): LoopState => ({ kind: 'created', spec, id: 'c1', startedAt: 0, shortRuns: 0, ...over });
const existing = (over: Partial<ExistingWorkload> = {}): ExistingWorkload => ({
  instanceName: spec.instanceName,
  runtime: 'fake',
  id: 'old',
  state: ExecutionState.succeeded(),
  ...over,
});
const command = (c: Extract<LoopInput, { kind: 'command' }>['command']): LoopInput => ({ kind: 'command', command: c });

/** What a transition comes to, in words a table can hold. */
const seen = (t: Transition) => ({
  state: t.state.kind,
  reports: t.reports.map((r) => `${r.instanceName.id === spec.instanceName.id ? '' : 'next '}${formatState(r.executionState)}`),
  effects: t.effects.map((e) => e.kind),
  follows: isBusy(t.state) ? [] : follows(t.state).map((f) => f.key),
  end: t.end,
});
const rows: Array<[string, LoopState, LoopInput, Partial<ReturnType<typeof seen>>]> = [
  // swdd~agent-workload-control-loop-executes-create~4
  [
    'a create on an idle loop says Pending(Starting) and creates',
    IDLE,
    command({ kind: 'create', spec }),
    { state: 'creating', reports: ['Pending(Starting): Triggered at runtime.'], effects: ['create'] },
  ],
  // swdd~agent-skips-unknown-runtime~2
  [
    'a create for a runtime the agent does not have is Pending(StartingFailed) and creates nothing',
    IDLE,
    command({ kind: 'create', spec: { ...spec, runtime: 'nope' } }),
    { state: 'absent', reports: ['Pending(Starting): Triggered at runtime.', 'Pending(StartingFailed): Unsupported Runtime'], effects: [] },
  ],
  [
    'a create of a kept workload of the same instance starts it again in place',
    { kind: 'adopted', existing: existing() },
    command({ kind: 'create', spec }),
    { state: 'startingAgain', reports: ['Pending(Starting): Triggered at runtime.'], effects: ['startAgain'] },
  ],
  // swdd~agent-delete-old-workload~3
  [
    'a create of another config deletes the kept workload first',
    { kind: 'adopted', existing: existing({ instanceName: next.instanceName }) },
    command({ kind: 'create', spec }),
    { state: 'removingExisting', reports: ['next Stopping(RequestedAtRuntime)'], effects: ['removeExisting'] },
  ],
  [
    'a create that came through is watched',
    { kind: 'creating', spec, retries: 0, shortRuns: 0 },
    { kind: 'created', id: 'c1' },
    { state: 'created', reports: [], follows: ['watch restarts'] },
  ],
  // swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1
  [
    'a create that failed is retried after its back-off, saying why',
    { kind: 'creating', spec, retries: 2, shortRuns: 0 },
    { kind: 'createFailed', cause: 'boom', refused: false },
    { state: 'retrying', reports: ['Pending(Starting): Retry 3: boom'], follows: ['retry 2'] },
  ],
  // swdd~agent-workload-control-loop-handles-failed-workload-creation~1
  [
    'a create the runtime refuses is Pending(StartingFailed), not retried',
    { kind: 'creating', spec, retries: 0, shortRuns: 0 },
    { kind: 'createFailed', cause: 'bad config', refused: true },
    { state: 'absent', reports: ['Pending(StartingFailed): bad config'], follows: [] },
  ],
  // swdd~agent-workload-control-loop-executes-retry~1
  [
    'the wait over, the next attempt',
    { kind: 'retrying', spec, retries: 2, shortRuns: 0, delayMs: 1000 },
    { kind: 'waited' },
    { state: 'creating', effects: ['create'] },
  ],
  // swdd~workload-control-loop-receives-workload-states~1
  [
    'a state of the watched workload is reported, nothing else',
    running(),
    { kind: 'seen', state: ExecutionState.running() },
    { state: 'created', reports: ['Running(Ok)'], effects: [] },
  ],
  // swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
  [
    'an exit after a long run restarts at once: in place when it succeeded',
    running(),
    { kind: 'seen', state: ExecutionState.succeeded() },
    { state: 'startingAgain', reports: ['Succeeded(Ok)', 'Pending(Starting): Triggered at runtime.'], effects: ['startAgain'] },
  ],
  [
    'a failure after a long run restarts at once, as an update',
    running(),
    { kind: 'seen', state: ExecutionState.failed("Exit code: '1'") },
    { state: 'removing', reports: ["Failed(ExecFailed): Exit code: '1'", 'Stopping(RequestedAtRuntime)'], effects: ['remove'] },
  ],
  // rx~crash-loop-backoff~1, rx~crash-loop-backoff-state~1
  [
    'a second short run waits out the crash-loop back-off, saying so',
    running({ startedAt: now.at - 1000, shortRuns: 1 }),
    { kind: 'seen', state: ExecutionState.failed("Exit code: '1'") },
    {
      state: 'backingOff',
      reports: [
        "Failed(ExecFailed): Exit code: '1'",
        "Pending(WaitingToStart): Restart 2 of a workload that keeps exiting (last: Exit code: '1'), in 10 s (crash-loop back-off).",
      ],
      follows: ['restart 2'],
    },
  ],
  // rx~health-unhealthy-fails-and-stops~1
  [
    'an unhealthy workload is reported and stopped; its policy does not act on that state: it waits for the stop',
    running(),
    { kind: 'seen', state: { ...ExecutionState.failed('Health check failed'), health: 'unhealthy' } },
    { state: 'created', reports: ['Failed(ExecFailed): Health check failed'], effects: ['stop'] },
  ],
  [
    'once stopped, its policy restarts it',
    running(),
    { kind: 'stoppedUnhealthy', state: { ...ExecutionState.failed('Health check failed'), health: 'unhealthy' } },
    { state: 'removing', reports: ['Stopping(RequestedAtRuntime)'], effects: ['remove'] },
  ],
  // rx~pull-ahead~1
  [
    'an update with an image to pull keeps the old instance watched while it is pulled',
    running(),
    command({ kind: 'update', spec: next }),
    { state: 'fetching', reports: [], effects: [], follows: ['watch only', 'pull 0'] },
  ],
  // swdd~agent-workload-control-loop-executes-update~3
  [
    'an update of a create still retrying removes by name what may run of it first (no id is known)',
    { kind: 'retrying', spec, retries: 0, shortRuns: 0, delayMs: 500 },
    command({ kind: 'update', spec: next }),
    { state: 'removing', reports: ['Stopping(RequestedAtRuntime)'], effects: ['removeByName'] },
  ],
  [
    'the old instance removed, the new one is created',
    { kind: 'removing', spec, id: 'c1', afterwards: { kind: 'attempt', spec: next, shortRuns: 0 } },
    { kind: 'removed' },
    { state: 'creating', reports: ['Removed', 'next Pending(Starting): Triggered at runtime.'], effects: ['create'] },
  ],
  // swdd~agent-workload-control-loop-delete-failed-allows-retry~1
  [
    'a removal that failed is reported once and kept for the next command',
    { kind: 'removing', spec, id: 'c1', afterwards: { kind: 'end' } },
    { kind: 'removed', failure: 'busy' },
    { state: 'deleteFailed', reports: ['Stopping(DeleteFailed): busy'], follows: [], end: false },
  ],
  // swdd~agent-workload-control-loop-executes-delete~3
  [
    'a delete of a running workload removes it',
    running(),
    command({ kind: 'delete', instanceName: spec.instanceName }),
    { state: 'removing', effects: ['remove'] },
  ],
  [
    'the removal of a delete done, the loop ends',
    { kind: 'removing', spec, id: 'c1', afterwards: { kind: 'end' } },
    { kind: 'removed' },
    { reports: ['Removed'], end: true },
  ],
  [
    'a delete before anything was created says Removed and ends',
    IDLE,
    command({ kind: 'delete', instanceName: spec.instanceName }),
    { reports: ['Removed'], end: true },
  ],
  // swdd~agent-workload-control-loop-executes-resume~1
  ['a resume looks for its workload', IDLE, command({ kind: 'resume', spec }), { state: 'finding', effects: ['find'] }],
  [
    'a workload to resume that is gone is Failed(Lost)',
    { kind: 'finding', spec, tries: 0 },
    { kind: 'found' },
    { state: 'absent', reports: ['Failed(Lost): The workload to resume was not found.'] },
  ],
  // swdd~agent-workload-control-loop-executes-resume~1
  [
    'a workload the runtime could not look for is not lost: nothing is reported, and it is looked for again after a back-off',
    { kind: 'finding', spec, tries: 0 },
    { kind: 'found', failure: "Podman's list is not JSON: garbage{{" },
    { state: 'refinding', reports: [], effects: ['warn'], follows: ['find 1'] },
  ],
  // swdd~agent-workload-control-loop-executes-resume~1
  [
    'when the wait is over the workload is looked for again',
    { kind: 'refinding', spec, tries: 1, delayMs: 500 },
    { kind: 'waited' },
    { state: 'finding', reports: [], effects: ['find'] },
  ],
  ['an outcome that is not for the state changes nothing', running(), { kind: 'created', id: 'x' }, { state: 'created', reports: [], effects: [] }],
];

describe('the control loop as a pure step (lib/workload-loop.ts)', () => {
  for (const [title, state, input, expected] of rows) {
    it(title, () => {
      expect(seen(step(state, input, now, context))).to.deep.include(expected);
    });
  }

  // rx~pull-ahead~1
  it('a failed pull is told on the new instance, logged, and tried again after the create back-off, the watch going on', () => {
    const fetching = step(running(), command({ kind: 'update', spec: next }), now, context).state;
    const failed = step(fetching, { kind: 'pullFailed', cause: 'registry down' }, now, context);
    expect(seen(failed)).to.deep.include({
      reports: ['next Pending(Starting): Retry 1: registry down (the old instance runs until the image is pulled)'],
      effects: ['warn'],
      follows: ['watch only', 'pull wait 1'],
    });
    expect(follows(failed.state)[1]).to.deep.include({ ms: createBackoffMs(0, now.jitter) });
    expect(seen(step(failed.state, { kind: 'waited' }, now, context)).follows).to.deep.equal(['watch only', 'pull 1']);
    expect(seen(step(fetching, { kind: 'pulled' }, now, context))).to.deep.include({ state: 'removing', reports: ['Stopping(RequestedAtRuntime)'] });
  });

  it('an update while a pull waits gives the waiting instance up (Removed) and goes on from the old one', () => {
    const fetching = step(running(), command({ kind: 'update', spec: next }), now, context).state;
    const other = workload('nginx', { config: 'image: nginx:3' });
    expect(seen(step(fetching, command({ kind: 'update', spec: other }), now, context)).reports).to.deep.equal(['next Removed']);
  });

  it('a created workload starts when its input came, and counts as running while it is removed', () => {
    const created = step({ kind: 'creating', spec, retries: 0, shortRuns: 3 }, { kind: 'created', id: 'c9' }, now, context).state;
    expect(created).to.deep.include({ kind: 'created', id: 'c9', startedAt: now.at, shortRuns: 3 });
    const removing = step(created, command({ kind: 'delete', instanceName: spec.instanceName }), now, context).state;
    expect(managed(removing)).to.equal(created);
    expect(managed(step(removing, { kind: 'removed' }, now, context).state)).to.equal(undefined);
  });

  // rx~pull-ahead~1
  it('holds what an update fetches as data: the images its runtime reads from the configs, asked once', () => {
    const asked: Array<[string, string | undefined]> = [];
    const reading: RuntimeConnector = Object.assign(Object.create(runtime), {
      imagesToFetch: (to: typeof next, from?: typeof spec) => {
        asked.push([to.runtimeConfig, from?.runtimeConfig]);
        return ['nginx:2'];
      },
    });
    const t = step(running(), command({ kind: 'update', spec: next }), now, { ...context, runtimes: new Map([['fake', reading]]) });
    expect(asked).to.deep.equal([[next.runtimeConfig, spec.runtimeConfig]]);
    expect(t.state).to.deep.include({ kind: 'fetching', images: ['nginx:2'] });
    expect(follows(t.state).find((f) => f.kind === 'pull')).to.deep.include({ spec: next, images: ['nginx:2'] });
    expect(JSON.parse(JSON.stringify(t.state)), 'the state is plain data').to.deep.equal(t.state);
  });

  it('goes straight to the update when its runtime finds nothing to fetch', () => {
    const none: RuntimeConnector = Object.assign(Object.create(runtime), { imagesToFetch: () => [] });
    const t = step(running(), command({ kind: 'update', spec: next }), now, { ...context, runtimes: new Map([['fake', none]]) });
    expect(seen(t)).to.deep.include({ state: 'removing', effects: ['remove'] });
  });
});
