// The rules of a container state cache (swdd~podmancli-uses-container-state-cache~1): how the polls of an
// engine's containers and its events (in the words of ports.ts, which each runtime translates into) make one
// picture of all containers. The rules know what engines do: an exit told early (Podman's conmon writes exit
// files before Podman's own event), a container shown `stopped` for a moment on its way down. Pure:
// lib/runtimes/containers/container-cache.ts keeps the timing (ticks, one poll at a time, the event stream) and feeds this reducer.
import { LayeredMap } from './layered-map.js';
import type { Container, ContainerChange, ContainerEvent, Snapshot } from './ports.js';

export interface ContainerView {
  /** The picture of all containers, from the last poll and the events since; none before the first poll. */
  readonly containers?: ReadonlyMap<string, Container>;
  /** The number of the poll the picture rests on. */
  readonly poll: number;
  /** Exit codes the exits told, for containers a poll still shows as `stopped`. */
  readonly exitCodes: ReadonlyMap<string, number>;
  /** Exits told early (conmon's exit files) that the engine's own events have not caught up with yet, with when they were heard. */
  readonly early: ReadonlyMap<string, number | undefined>;
  /** When each container's latest start that the picture applied happened (the engine's time of it). */
  readonly started: ReadonlyMap<string, number>;
  /** When each container's latest exit the picture applied happened, however it was told (kept after Podman took the exit file). */
  readonly exited: ReadonlyMap<string, number>;
  /** Events that came while a poll ran (undefined: none runs): applied again on top of its result. */
  readonly duringPoll?: readonly ContainerEvent[];
}

export type ViewInput =
  /** The engine's event, or (`early`) what was told before it (an exit file, the agent's own start); `at`: when it came (dates the snapshot when the event has no time of its own). */
  | { readonly kind: 'event'; readonly event: ContainerEvent; readonly early?: boolean; readonly at?: number }
  | { readonly kind: 'pollStarted' }
  /** `eventsHealthy`: the event stream was up, so a change it did not announce means it missed one. */
  /** `at`: when the poll answered. */
  | { readonly kind: 'polled'; readonly poll: number; readonly containers: readonly Container[]; readonly eventsHealthy: boolean; readonly at?: number }
  | { readonly kind: 'pollFailed'; readonly poll: number; readonly error: string; readonly at?: number };

export interface ViewStep {
  readonly view: ContainerView;
  /** What the watchers see now, when it changed. */
  readonly snapshot?: Snapshot;
  /** The poll found a change the event stream did not announce: the stream is stalled. */
  readonly missedEvent?: boolean;
  /**
   * The poll shows a container `stopped` (its process ended, no exit told) that the picture did not: its exit file
   * and died event may have come before the watches were up, so it is to be polled again soon.
   */
  readonly settling?: boolean;
}

/**
 * What conmon's exit folder tells when an exit file goes: Podman took it (its own state says the container
 * exited, or it was started again), so an exit told early no longer outweighs what `podman ps` shows.
 */
export const EXIT_FILE_TAKEN: ContainerChange = 'exit-file-taken';

export const EMPTY_VIEW: ContainerView = { poll: 0, exitCodes: new Map(), early: new Map(), started: new Map(), exited: new Map() };

export function stepView(view: ContainerView, input: ViewInput): ViewStep {
  switch (input.kind) {
    case 'event':
      return onEvent(view, input.event, input.early ?? false, input.event.at ?? input.at);
    case 'pollStarted':
      return { view: { ...view, duringPoll: [] } };
    case 'polled':
      return onPoll(view, input);
    case 'pollFailed':
      return { view: { ...view, duringPoll: undefined }, snapshot: { poll: input.poll, error: input.error, heardAt: input.at } };
  }
}

const snapshotOf = (
  containers: ReadonlyMap<string, Container>,
  poll: number,
  heardAt: number | undefined,
  changed: ReadonlySet<string> | undefined,
): Snapshot => ({
  poll,
  containers,
  heardAt,
  changed,
});

/** Whether two rows of a container read the same to a state getter: its state, its exit code, its pod. */
const sameReading = (a: Container, b: Container) => a.state === b.state && a.exitCode === b.exitCode && a.pod === b.pod && a.isInfra === b.isInfra;

/** The containers a poll shows otherwise than the picture before it; undefined before the first picture. */
function changedBetween(before: ReadonlyMap<string, Container> | undefined, after: ReadonlyMap<string, Container>): ReadonlySet<string> | undefined {
  if (before === undefined) return undefined;
  const changed = new Set<string>();
  for (const [id, c] of after) {
    const was = before.get(id);
    if (was === undefined || (was !== c && !sameReading(was, c))) changed.add(id);
  }
  for (const id of before.keys()) if (!after.has(id)) changed.add(id);
  return changed;
}

/**
 * A snapshot is numbered after the poll it rests on: an event changes a container or two, the rest is
 * as old as that poll. Before the first poll there is nothing to apply an event to (that poll is under way).
 */
function onEvent(view: ContainerView, event: ContainerEvent, early: boolean, heardAt: number | undefined): ViewStep {
  if (event.change === EXIT_FILE_TAKEN) {
    // At every exit: the view changes only when the exit was told early and Podman's own word has not come yet.
    if (!view.early.has(event.id)) return { view };
    const early = new Map(view.early);
    early.delete(event.id);
    return { view: { ...view, early } };
  }
  const tracked = trackedOf(view);
  if (event.change === 'exited' && !staleExit(event, tracked)) {
    if (early) tracked.early.set(event.id, event.at);
    else tracked.early.delete(event.id);
  }
  const duringPoll = view.duringPoll && [...view.duringPoll, event];
  if (view.containers === undefined) return { view: { ...view, ...mapsOf(tracked), duringPoll } };
  // The picture is copied only when the event changes what it shows (the host's others, and news it has, change nothing).
  const containers = new Edited(view.containers);
  const changed = apply(event, containers, tracked);
  const next: ContainerView = { ...view, ...mapsOf(tracked), duringPoll, containers: containers.current };
  return changed ? { view: next, snapshot: snapshotOf(containers.current, view.poll, heardAt, new Set([event.id])) } : { view: next };
}

/** Podman's states of a container that no event has ended yet. */
const STILL_UP: ReadonlySet<string> = new Set(['running', 'stopping', 'stopped']);

function onPoll(view: ContainerView, { poll, containers: listed, eventsHealthy, at }: Extract<ViewInput, { kind: 'polled' }>): ViewStep {
  const tracked = trackedOf(view);
  const picture = new Edited(new Map(listed.map((c) => [c.id, settled(c, tracked)])));
  for (const e of view.duringPoll ?? []) apply(e, picture, tracked);
  const containers = picture.current;
  // A running container the events left running, or one they never removed, that Podman says otherwise: missed.
  // A container on its way down (`stopping`, `stopped` for a moment) has no event yet: its exit comes.
  const missedEvent =
    eventsHealthy &&
    view.containers !== undefined &&
    [...view.containers.values()].some((c) => c.state === 'running' && !STILL_UP.has(containers.get(c.id)?.state ?? 'gone'));
  const settling = [...containers.values()].some((c) => c.state === 'stopped' && view.containers?.get(c.id)?.state !== 'stopped');
  return {
    view: { ...mapsOf(tracked), containers, poll, duringPoll: undefined },
    snapshot: snapshotOf(containers, poll, at, changedBetween(view.containers, containers)),
    missedEvent,
    settling,
  };
}

/**
 * A map of the view's as one step edits it: a map is never changed but layered (lib/layered-map.ts), since an
 * event changes what is tracked of a container or two and copying every map at every event made a burst of N
 * creates cost N² (measured: the costliest step of 100 creates).
 */
class Edited<V> {
  constructor(private map: ReadonlyMap<string, V>) {}

  get current(): ReadonlyMap<string, V> {
    return this.map;
  }

  get(key: string): V | undefined {
    return this.map.get(key);
  }

  has(key: string): boolean {
    return this.map.has(key);
  }

  set(key: string, value: V): void {
    if (this.map.has(key) && this.map.get(key) === value) return;
    this.map = LayeredMap.of(this.map).with(key, value);
  }

  /** Whether it was there. */
  delete(key: string): boolean {
    if (!this.map.has(key)) return false;
    this.map = LayeredMap.of(this.map).without(key);
    return true;
  }
}

interface Tracked {
  readonly exitCodes: Edited<number>;
  readonly early: Edited<number | undefined>;
  readonly started: Edited<number>;
  readonly exited: Edited<number>;
}

const trackedOf = (view: ContainerView): Tracked => ({
  exitCodes: new Edited(view.exitCodes),
  early: new Edited(view.early),
  started: new Edited(view.started),
  exited: new Edited(view.exited),
});

/** The maps of `tracked` as a view holds them. */
const mapsOf = (tracked: Tracked): Pick<ContainerView, 'exitCodes' | 'early' | 'started' | 'exited'> => ({
  exitCodes: tracked.exitCodes.current,
  early: tracked.early.current,
  started: tracked.started.current,
  exited: tracked.exited.current,
});

/** An exit of a run before the latest start applied: the engine's stream told it after a quick restart. */
function staleExit(e: ContainerEvent, { started }: Tracked): boolean {
  const start = started.get(e.id);
  return e.at !== undefined && start !== undefined && e.at < start;
}

/**
 * How much later than the exit conmon told Podman may log the start of the same run: a container that ends at
 * once has often exited before Podman logs its start (measured: the start's time up to a few ms after the exit
 * file's notice). Nothing starts a container again that soon after an exit but the agent, whose own starts say so.
 */
export const START_EVENT_LAG_MS = 50;

/**
 * A start of a run whose exit the picture already applied: the engine's stream is behind (Podman's start event
 * may come after the exit file, and after Podman took it). A start after that exit (a restart, by Podman's time
 * of it, or one the agent asked for) is not; with an exit told early but no times, a start is taken for old.
 */
function staleStart(e: ContainerEvent, { early, exited }: Tracked): boolean {
  if (early.has(e.id) && (early.get(e.id) === undefined || e.at === undefined)) return true;
  const exitAt = exited.get(e.id);
  return exitAt !== undefined && e.at !== undefined && e.at <= exitAt + (e.own ? 0 : START_EVENT_LAG_MS);
}

/** A container's states on its way up, by the change that tells it. */
const STARTING: Readonly<Record<string, string>> = { created: 'created', initialized: 'initialized', started: 'running' };

/** An event that shows a container the picture may not have: on its way up, with its name and labels told. */
const learnsOf = (e: ContainerEvent) => e.container !== undefined && e.change in STARTING;

/**
 * Applies an event to a picture (and what is tracked of exits); true when it is news for the watchers: it
 * changed what they see, or it is a start (or a pause) that one may wait for, however the picture showed it.
 * A container the picture does not show yet is added when the event tells enough of it (Podman's create,
 * init and start do): a new workload's state checker then hears of it without waiting for a poll, and the
 * host's other containers, however they churn, cause no poll.
 */
function apply(e: ContainerEvent, to: Edited<Container>, tracked: Tracked): boolean {
  const c = to.get(e.id);
  if (!c && learnsOf(e)) {
    if (e.change === 'started' && staleStart(e, tracked)) return false;
    to.set(e.id, { id: e.id, ...e.container, state: STARTING[e.change] });
    if (e.change === 'started' && e.at !== undefined) tracked.started.set(e.id, e.at);
    return true;
  }
  if (e.change === 'exited') {
    if (staleExit(e, tracked)) return false;
    if (e.exitCode !== undefined) tracked.exitCodes.set(e.id, e.exitCode);
    if (e.at !== undefined && e.at > (tracked.exited.get(e.id) ?? Number.NEGATIVE_INFINITY)) tracked.exited.set(e.id, e.at);
    if (!c) return false;
    const exitCode = tracked.exitCodes.get(e.id) ?? c.exitCode;
    // Podman's own word of an exit conmon told first changes nothing the watchers see.
    if (c.state === 'exited' && c.exitCode === exitCode) return false;
    to.set(e.id, { ...c, state: 'exited', exitCode: exitCode });
    return true;
  }
  if (e.change === 'started') {
    if (staleStart(e, tracked)) return false;
    tracked.early.delete(e.id);
    tracked.exitCodes.delete(e.id);
    if (e.at !== undefined) tracked.started.set(e.id, e.at);
    if (!c) return false;
    // A container the picture shows running already is not copied; its start is still news to a watcher that waits for it.
    if (c.state !== 'running') to.set(e.id, { ...c, state: 'running' });
    return true;
  }
  if (e.change === 'removed') {
    tracked.exitCodes.delete(e.id);
    tracked.early.delete(e.id);
    tracked.started.delete(e.id);
    tracked.exited.delete(e.id);
    return to.delete(e.id);
  }
  if (e.change === 'paused' || e.change === 'resumed') {
    const state = e.change === 'paused' ? 'paused' : 'running';
    if (!c) return false;
    if (c.state !== state) to.set(e.id, { ...c, state });
    return true;
  }
  // create, init (old news for a container the picture shows) and what says nothing about a state
  return false;
}

/**
 * Podman shows a container that died as `stopped` for a moment: with its exit code known, it has exited.
 * Until Podman's own died event comes, `podman ps` may still show a container `running` whose exit
 * conmon already told: that exit stands (only a newer start undoes it).
 */
function settled(c: Container, { exitCodes, early }: Tracked): Container {
  const exitCode = exitCodes.get(c.id);
  if (exitCode === undefined) return c;
  return c.state === 'stopped' || (c.state === 'running' && early.has(c.id)) ? { ...c, state: 'exited', exitCode: exitCode } : c;
}

/** What changed for the watchers between two pictures, a line per container (for --debug): `name: running → exited (1)`. */
export function changesBetween(before: ContainerView, after: ContainerView): string[] {
  const was = before.containers ?? new Map<string, Container>();
  const now = after.containers ?? new Map<string, Container>();
  const shown = (c: Container) => (c.state === 'exited' && c.exitCode !== undefined ? `exited (${c.exitCode})` : (c.state ?? 'unknown'));
  const nameOf = (c: Container) => c.names?.[0] ?? c.id.slice(0, 12);
  const lines: string[] = [];
  for (const [id, c] of now) {
    const old = was.get(id);
    if (!old) lines.push(`${nameOf(c)}: ${shown(c)}`);
    else if (shown(old) !== shown(c)) lines.push(`${nameOf(c)}: ${shown(old)} → ${shown(c)}`);
  }
  for (const [id, c] of was) if (!now.has(id)) lines.push(`${nameOf(c)}: removed`);
  return lines;
}
