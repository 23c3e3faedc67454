// How the drivers and the pipelines are put together, for the agent and for the specs and benchmarks
// that run it on real parts.
import { PodmanCli } from '../lib/runtimes/podman/cli.js';
import { EMPTY, type Observable, Subject, filter, merge, share } from 'rxjs';
import { ContainerdRuntime, type Scope, containerdEvents, listContainers } from '../lib/runtimes/containerd/runtime.js';
import { type NamespacedEvent, splitScope } from '../lib/runtimes/containerd/nerdctl.js';
import { conmonExits, containerEvents } from '../lib/runtimes/podman/events.js';
import { podmanRuntimes, systemdRuns } from '../lib/runtimes/podman/runtime.js';
import type { Logger } from '../lib/logger.js';
import type { ContainerEvent, WatchState } from '../lib/ports.js';
import type { RuntimeConnector } from '../lib/runtime-connector.js';
import { CONTAINERD, VERIFY_INTERVAL_MS, containerCache } from '../streams/container-cache.js';
import { stateChecker } from '../streams/state-checker.js';
import { type Trace, noTrace } from '../streams/trace.js';

/**
 * `podman` and `podman-kube` on one CLI, one container-state cache (kept by `podman events` unless off) and one
 * state checker; `containerd` on nerdctl (`nerdctl`: its CLI) with a cache of its own, kept by containerd's
 * events. `health`: the agent runs the podman workloads' health checks (lib/runtimes/podman/health.ts), where Podman's
 * timers do not (`podmanTimers`: systemd runs); `trace` tells --debug what the caches do (`podman.cache`,
 * `containerd.cache`), `eventsRestarted` the metrics how often `podman events` started again.
 */
export function builtInRuntimes(
  log: Logger,
  cli = new PodmanCli({ log }),
  {
    events = true,
    verifyMs = VERIFY_INTERVAL_MS,
    health = true,
    podmanTimers = systemdRuns(),
    trace = noTrace,
    eventsRestarted,
    nerdctl = new PodmanCli({ log, binary: 'nerdctl' }),
    containerdScope = [],
  }: {
    events?: boolean;
    verifyMs?: number;
    health?: boolean;
    podmanTimers?: boolean;
    trace?: Trace;
    eventsRestarted?: () => void;
    nerdctl?: PodmanCli;
    /** nerdctl's general options for every containerd workload (the agent config's `containerd` namespace and address). */
    containerdScope?: Scope;
  } = {},
): Map<string, RuntimeConnector> {
  // A `podman start` the agent ran comes before Podman's stream tells it (with a late died event of the run
  // before in between): the cache hears it from the agent at once.
  const ownStarts$ = new Subject<ContainerEvent>();
  const cache = containerCache(() => cli.listContainers(), events ? containerEvents(cli) : undefined, {
    verifyMs,
    early$: merge(events ? conmonExits() : EMPTY, ownStarts$),
    log,
    trace,
    eventsRestarted,
  });
  // One containerd cache a scope (namespace, address), made when a workload first needs it; an idle one costs
  // nothing (it follows containerd only while watched). Past MAX_SCOPES the oldest is forgotten. The events come
  // from one `nerdctl events` per containerd (it hears every namespace), shared by the caches of its namespaces;
  // past MAX_EVENT_STREAMS containerds, the scopes of the others are polled.
  const containerdCaches = new Map<string, WatchState>();
  const eventStreams = new Map<string, Observable<NamespacedEvent>>();
  const eventsOf = (containerd: Scope): Observable<NamespacedEvent> | undefined => {
    const key = containerd.join('\0');
    let stream = eventStreams.get(key);
    if (!stream && eventStreams.size < MAX_EVENT_STREAMS) {
      stream = containerdEvents(nerdctl, containerd).pipe(share());
      eventStreams.set(key, stream);
    }
    return stream;
  };
  const watchIn = (scope: Scope): WatchState => {
    const key = scope.join('\0');
    let watch = containerdCaches.get(key);
    if (!watch) {
      if (containerdCaches.size >= MAX_SCOPES) containerdCaches.delete(containerdCaches.keys().next().value!);
      const { namespace, containerd } = splitScope(scope);
      const events$ = events ? eventsOf(containerd)?.pipe(filter((e) => e.namespace === namespace)) : undefined;
      watch = stateChecker(
        containerCache(() => listContainers(nerdctl, [], scope), events$, { verifyMs, log, trace, engine: CONTAINERD }),
        'containerd',
      );
      containerdCaches.set(key, watch);
    }
    return watch;
  };
  const startedInPlace = (id: string) => ownStarts$.next({ id, status: 'start', at: Date.now() });
  const runtimes = podmanRuntimes(cli, stateChecker(cache), log, { health, podmanTimers, startedInPlace });
  runtimes.set('containerd', new ContainerdRuntime(nerdctl, watchIn, containerdScope));
  return runtimes;
}

/** How many containerd scopes (namespace and address pairs) have a cache at once. */
const MAX_SCOPES = 64;
/** How many containerds (addresses) the agent follows by their events at once. */
const MAX_EVENT_STREAMS = 4;
