// How a container runtime follows its containers' states: a cache of the engine's containers (kept by its events,
// verified by its list) and a state checker over it, on the run's clock, told to --debug and the metrics.
import { EMPTY, type Observable, ReplaySubject, merge } from 'rxjs';
import type { Container, ContainerEvent, Engine, WatchState } from '../../ports.js';
import type { RuntimeContext } from '../base/module.js';
import { containerCache } from './container-cache.js';
import { stateChecker } from './state-checker.js';

/** Where a runtime's container cache learns of its containers. */
export interface ContainerSource {
  readonly engine: Engine;
  /** Every container of the engine (or of its scope), as a list call shows it. */
  readonly list: () => Observable<Container[]>;
  /** The engine's events of its containers. */
  readonly events$?: Observable<ContainerEvent>;
  /** What the engine tells before its events do (conmon's exit files); followed with the events. */
  readonly early$?: Observable<ContainerEvent>;
  /** What the agent did itself and the events tell later (a start it ran): heard at once. */
  readonly own$?: Observable<ContainerEvent>;
}

/**
 * A state checker over a cache of the containers `source` tells of: polled while watched, kept by its events
 * where it has them (the agent may follow by polls alone), told by `--debug=<stage>`.
 */
export function containerWatch(context: RuntimeContext, { engine, list, events$, early$ = EMPTY, own$ = EMPTY }: ContainerSource): WatchState {
  const { scheduler, log, trace, config, eventsRestarted, held } = context;
  // Replayed: a cache its watchers leave after the run ended stops at once too.
  const ended$ = new ReplaySubject<void>(1);
  held.add(() => ended$.next());
  const cache = containerCache(list, config.events ? events$ : undefined, {
    ended$,
    scheduler,
    verifyMs: config.verifyMs,
    early$: config.events ? merge(early$, own$) : own$,
    log,
    trace,
    engine,
    eventsRestarted: eventsRestarted && (() => eventsRestarted(engine.name)),
  });
  return stateChecker(cache, scheduler, engine.name);
}
