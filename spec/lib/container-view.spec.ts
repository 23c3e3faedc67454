import type { Container, ContainerChange } from '../../lib/ports.js';
import { expect } from 'chai';
import { type ContainerView, EMPTY_VIEW, EXIT_FILE_TAKEN, type ViewInput, changesBetween, stepView } from '../../lib/container-view.js';

const running = (id: string): Container => ({ id, state: 'running' });
const run = (inputs: ViewInput[], from: ContainerView = EMPTY_VIEW) => {
  let view = from;
  const steps = inputs.map((input) => {
    const step = stepView(view, input);
    view = step.view;
    return step;
  });
  return {
    view,
    steps,
    states: () => Object.fromEntries([...(view.containers?.values() ?? [])].map((c) => [c.id, `${c.state}${c.state === 'exited' ? ` ${c.exitCode}` : ''}`])),
  };
};
const polled = (poll: number, containers: Container[], eventsHealthy = true): ViewInput => ({ kind: 'polled', poll, containers, eventsHealthy });
const died = (id: string, exitCode: number, early = false): ViewInput => ({ kind: 'event', event: { id, change: 'exited', exitCode }, early });

// swdd~podmancli-uses-container-state-cache~1
describe("the container view (the cache's rules)", () => {
  it('takes a poll as the picture and numbers its snapshot after it', () => {
    const { steps, states } = run([{ kind: 'pollStarted' }, polled(1, [running('a'), running('b')])]);
    expect(steps[1].snapshot?.poll).to.equal(1);
    expect(states()).to.deep.equal({ a: 'running', b: 'running' });
  });

  it('says which containers each snapshot shows otherwise than the one before: all at the first poll, the one an event changed, those a poll found changed, added or gone', () => {
    const { steps } = run([
      { kind: 'pollStarted' },
      polled(1, [running('a'), running('b')]),
      died('a', 3),
      { kind: 'pollStarted' },
      polled(2, [{ id: 'a', state: 'exited', exitCode: 3 }, { id: 'b', state: 'paused' }, running('c')]),
      { kind: 'pollStarted' },
      polled(3, [{ id: 'a', state: 'exited', exitCode: 3 }, running('c')]),
    ]);
    const changed = (i: number) => (steps[i].snapshot?.changed ? [...steps[i].snapshot!.changed!].sort() : 'all');
    expect([changed(1), changed(2), changed(4), changed(6)]).to.deep.equal(['all', ['a'], ['b', 'c'], ['b']]);
  });

  it('applies an event to the picture, as old as the poll it rests on; before the first poll an event changes nothing', () => {
    expect(run([died('a', 3)]).steps[0].snapshot).to.equal(undefined);
    const { steps, states } = run([{ kind: 'pollStarted' }, polled(4, [running('a')]), died('a', 3)]);
    expect(steps[2].snapshot?.poll).to.equal(4);
    expect(states()).to.deep.equal({ a: 'exited 3' });
  });

  it('applies a pause and a resume at once, as events tell them', () => {
    const event = (change: ContainerChange): ViewInput => ({ kind: 'event', event: { id: 'a', change } });
    const { steps, states } = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), event('paused')]);
    expect(steps[2].snapshot).not.to.equal(undefined);
    expect(states()).to.deep.equal({ a: 'paused' });
    expect(run([{ kind: 'pollStarted' }, polled(1, [{ id: 'a', state: 'paused' }]), event('resumed')]).states()).to.deep.equal({ a: 'running' });
  });

  it('passes over events of containers it does not show (no snapshot, no poll)', () => {
    const { steps } = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), { kind: 'event', event: { id: 'other', change: 'started' } }]);
    expect(steps[2].snapshot).to.equal(undefined);
  });

  it("shows a container it did not have once Podman's create, init or start event tells its name and labels", () => {
    const told = { names: ['web.1.agent'], labels: { name: 'web.1.agent', agent: 'agent' }, pod: '' };
    const start: ViewInput = { kind: 'event', event: { id: 'new', change: 'started', at: 5, container: told } };
    const { steps, view } = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), start]);
    expect(steps[2].snapshot?.poll, 'as old as the poll it rests on').to.equal(1);
    expect(view.containers?.get('new')).to.deep.equal({ id: 'new', ...told, state: 'running' });
    const created = run([{ kind: 'pollStarted' }, polled(1, []), { kind: 'event', event: { id: 'new', change: 'created', container: told } }]);
    expect(created.states()).to.deep.equal({ new: 'created' });
    // A died or removed container it never showed stays unshown, told or not.
    const died: ViewInput = { kind: 'event', event: { id: 'gone', change: 'exited', exitCode: 1, container: told } };
    expect(run([{ kind: 'pollStarted' }, polled(1, []), died]).steps[2].snapshot).to.equal(undefined);
  });

  it('applies the events that came while a poll ran again on top of its result', () => {
    const { states } = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), { kind: 'pollStarted' }, died('a', 2), polled(2, [running('a')])]);
    expect(states()).to.deep.equal({ a: 'exited 2' });
  });

  it('takes a container Podman shows as stopped, whose exit code an event told, as exited', () => {
    const { states } = run([
      { kind: 'pollStarted' },
      polled(1, [running('a')]),
      died('a', 5),
      { kind: 'pollStarted' },
      polled(2, [{ id: 'a', state: 'stopped' }]),
    ]);
    expect(states()).to.deep.equal({ a: 'exited 5' });
  });

  it('keeps an exit told early over a poll that still shows the container running, until a newer start', () => {
    const early = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), died('a', 1, true), { kind: 'event', event: { id: 'a', change: 'started' } }]);
    expect(early.states()).to.deep.equal({ a: 'exited 1' });
    const polledAgain = run([{ kind: 'pollStarted' }, polled(2, [running('a')], false)], early.view);
    expect(polledAgain.states()).to.deep.equal({ a: 'exited 1' });
    const podmanCaughtUp = run([died('a', 1), { kind: 'event', event: { id: 'a', change: 'started' } }], polledAgain.view);
    expect(podmanCaughtUp.states()).to.deep.equal({ a: 'running' });
  });

  it("a restart right after an exit told early runs: Podman's start event, later than that exit, is applied; the old run's late died event is not", () => {
    const event = (change: ContainerChange, at: number, exitCode?: number, early = false): ViewInput => ({
      kind: 'event',
      event: { id: 'a', change, exitCode, at },
      early,
    });
    const { steps, states, view } = run([
      { kind: 'pollStarted' },
      polled(1, [running('a')]),
      event('exited', 1_000, 0, true), // conmon: run 1 ended
      event('started', 900), // Podman's stream, behind: run 1's start
      event('started', 1_200), // `podman start`: run 2
      event('exited', 1_050, 0), // Podman's stream: run 1's died, told after run 2 started
    ]);
    expect(states()).to.deep.equal({ a: 'running' });
    expect(run([{ kind: 'pollStarted' }, polled(2, [running('a')], false)], view).states(), 'a poll after it agrees').to.deep.equal({ a: 'running' });
    // Step by step: exited at the exit file, unchanged by the old start, running at the new one, unchanged by the old died.
    expect(steps.slice(2).map((s) => s.snapshot?.containers?.values().next().value?.state)).to.deep.equal(['exited', undefined, 'running', undefined]);
    // Run 2's own exit is an exit again.
    expect(run([event('exited', 2_300, 3, true)], view).states()).to.deep.equal({ a: 'exited 3' });
  });

  // swdd~podman-state-getter-maps-state~3
  it("a container that ended at once: Podman's start event, logged a few ms after the exit conmon told, is of that run; the agent's own start is new when asked after that exit, not when the run it began ended before it returned", () => {
    const event = (change: ContainerChange, at: number, o: { exitCode?: number; early?: boolean; own?: boolean } = {}): ViewInput => ({
      kind: 'event',
      event: { id: 'a', change, exitCode: o.exitCode, at, own: o.own },
      early: o.early ?? false,
    });
    const { steps, states } = run([
      { kind: 'pollStarted' },
      polled(1, [running('a')]),
      event('exited', 1_000, { exitCode: 0, early: true }), // conmon: it ended
      { kind: 'event', event: { id: 'a', change: EXIT_FILE_TAKEN }, early: true }, // Podman's clean-up took the file
      event('started', 1_004), // Podman's stream, behind: the start it logged after the process had ended
      event('exited', 1_030, { exitCode: 0 }), // Podman's died
    ]);
    expect(steps.slice(2).map((s) => s.snapshot?.containers?.values().next().value?.state)).to.deep.equal(['exited', undefined, undefined, undefined]);
    expect(states()).to.deep.equal({ a: 'exited 0' });
    const restarted = run([
      { kind: 'pollStarted' },
      polled(1, [running('a')]),
      event('exited', 1_000, { exitCode: 0, early: true }),
      event('started', 1_020, { early: true, own: true }), // the agent's `podman start`, asked at 1 020, returned
    ]);
    expect(restarted.states()).to.deep.equal({ a: 'running' });
    const endedAtOnce = run([
      { kind: 'pollStarted' },
      polled(1, [{ id: 'a', state: 'exited', exitCode: 0 }]),
      event('exited', 1_010, { exitCode: 0, early: true }), // conmon: the run the start began ended at once
      event('started', 1_000, { early: true, own: true }), // the agent's `podman start`, asked at 1 000, returned after it
      event('started', 1_006), // Podman's stream: that run's start
    ]);
    expect(endedAtOnce.states()).to.deep.equal({ a: 'exited 0' });
    expect(endedAtOnce.steps.slice(3).map((s) => s.snapshot?.containers?.values().next().value?.state)).to.deep.equal([undefined, undefined]);
  });

  it('once Podman took the exit file, a poll that shows the container running (started again) is believed', () => {
    const told = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), died('a', 0, true)]).view;
    expect(run([{ kind: 'pollStarted' }, polled(2, [running('a')], false)], told).states(), 'Podman has not taken it yet').to.deep.equal({ a: 'exited 0' });
    const taken = run([{ kind: 'event', event: { id: 'a', change: EXIT_FILE_TAKEN }, early: true }], told);
    expect(taken.steps[0].snapshot, 'nothing to tell the watchers by itself').to.equal(undefined);
    expect(run([{ kind: 'pollStarted' }, polled(2, [running('a')], false)], taken.view).states()).to.deep.equal({ a: 'running' });
  });

  // swdd~podman-state-getter-maps-state~3
  it("Podman's died event of an exit conmon already told changes nothing the watchers see (no snapshot)", () => {
    const { steps, states } = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), died('a', 0, true), died('a', 0)]);
    expect(steps[2].snapshot, 'the exit told early').not.to.equal(undefined);
    expect(steps[3].snapshot, "Podman's own word of it").to.equal(undefined);
    expect(states()).to.deep.equal({ a: 'exited 0' });
  });

  // swdd~podman-state-getter-maps-state~3
  it("a start in place the agent tells (its podman start returned) outweighs Podman's late died event of the run before", () => {
    // conmon's exit file at 100, the agent's `podman start` returned at 300; Podman's stream then brings the
    // old run's died event (of its time, 150), and later the start (of its time, 250).
    const exitTold: ViewInput = { kind: 'event', event: { id: 'a', change: 'exited', exitCode: 0, at: 100 }, early: true };
    const ownStart: ViewInput = { kind: 'event', event: { id: 'a', change: 'started', at: 300 }, early: true };
    const oldDied: ViewInput = { kind: 'event', event: { id: 'a', change: 'exited', exitCode: 0, at: 150 } };
    const podmanStart: ViewInput = { kind: 'event', event: { id: 'a', change: 'started', at: 250 } };
    const { steps, states } = run([{ kind: 'pollStarted' }, polled(1, [running('a')]), exitTold, ownStart, oldDied, podmanStart]);
    expect(steps[3].snapshot, 'the own start is shown at once').not.to.equal(undefined);
    expect(steps[4].snapshot, 'the old died event changes nothing').to.equal(undefined);
    expect(states()).to.deep.equal({ a: 'running' });
    // The new run's exit ends it.
    const newDied: ViewInput = { kind: 'event', event: { id: 'a', change: 'exited', exitCode: 2, at: 400 } };
    expect(run([{ kind: 'pollStarted' }, polled(1, [running('a')]), exitTold, ownStart, oldDied, newDied]).states()).to.deep.equal({ a: 'exited 2' });
  });

  it('says an event was missed when a poll finds a running container exited or gone while the stream was up; one on its way down is no miss', () => {
    const base = run([{ kind: 'pollStarted' }, polled(1, [running('a')])]).view;
    expect(stepView(base, polled(2, [{ id: 'a', state: 'exited', exitCode: 0 }], true)).missedEvent).to.equal(true);
    expect(stepView(base, polled(2, [], true)).missedEvent, 'gone').to.equal(true);
    expect(stepView(base, polled(2, [{ id: 'a', state: 'stopping' }], true)).missedEvent, 'a podman stop under way').to.equal(false);
    expect(stepView(base, polled(2, [{ id: 'a', state: 'exited', exitCode: 0 }], false)).missedEvent).to.equal(false);
    expect(stepView(base, polled(2, [running('a')], true)).missedEvent).to.equal(false);
  });

  it('says a poll shows a container settling when it is newly stopped with no exit told, once', () => {
    const base = run([{ kind: 'pollStarted' }, polled(1, [running('a')])]).view;
    const first = stepView(base, polled(2, [{ id: 'a', state: 'stopped' }], true));
    expect(first.settling).to.equal(true);
    expect(stepView(first.view, polled(3, [{ id: 'a', state: 'stopped' }], true)).settling, 'already stopped in the picture').to.equal(false);
    const told = run([died('a', 0, true)], base).view;
    expect(stepView(told, polled(2, [{ id: 'a', state: 'stopped' }], true)).settling, 'its exit was told: it has exited').to.equal(false);
  });

  it('says why when a poll failed, and keeps the picture', () => {
    const { steps, view } = run([
      { kind: 'pollStarted' },
      polled(1, [running('a')]),
      { kind: 'pollStarted' },
      { kind: 'pollFailed', poll: 2, error: 'podman hung', at: 2_000 },
    ]);
    expect(steps[3].snapshot).to.deep.equal({ poll: 2, error: 'podman hung', heardAt: 2_000 });
    expect(view.containers?.get('a')?.state).to.equal('running');
  });

  it("dates a snapshot by what made it: an event's own time, a poll's answer", () => {
    const { steps } = run([
      { kind: 'pollStarted' },
      { kind: 'polled', poll: 1, containers: [running('a')], eventsHealthy: true, at: 1_000 },
      { kind: 'event', event: { id: 'a', change: 'exited', exitCode: 1, at: 1_250 } },
    ]);
    expect(steps.map((s) => s.snapshot?.heardAt)).to.deep.equal([undefined, 1_000, 1_250]);
  });

  it('tells what changed between two pictures, a line per container (for --debug)', () => {
    const before = run([
      { kind: 'pollStarted' },
      polled(1, [
        { ...running('a'), names: ['a.1.x'] },
        { ...running('b'), names: ['b.1.x'] },
      ]),
    ]).view;
    const after = run([died('a', 3), { kind: 'event', event: { id: 'b', change: 'removed' } }], before).view;
    expect(changesBetween(before, after)).to.deep.equal(['a.1.x: running → exited (3)', 'b.1.x: removed']);
    expect(changesBetween(EMPTY_VIEW, before)).to.deep.equal(['a.1.x: running', 'b.1.x: running']);
  });
});
