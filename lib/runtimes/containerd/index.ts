// The containerd module: the `containerd` runtime on nerdctl, with a container cache a scope (namespace and
// address), kept by containerd's events.
import { type Observable, catchError, defer, filter, map, of, share } from 'rxjs';
import type { WatchState } from '../../ports.js';
import { parseInstanceKey } from '../../workload.js';
import type { Cli } from '../base/cli.js';
import type { RuntimeContext, RuntimeModule } from '../base/module.js';
import { type NamespacedEvent, splitScope } from './nerdctl.js';
import { ContainerdRuntime, type Scope, containerdEvents, containerdStats, listContainers, nerdctlImageEngine, nerdctlPulls } from './runtime.js';
import { imageCollector } from '../containers/image-gc.js';
import { ImagePulls } from '../containers/image-pulls.js';
import { containerWatch } from '../containers/watch.js';
import { type ContainerdSettings, containerdSettings } from './settings.js';

/** How many containerd scopes (namespace and address pairs) have a cache at once. */
const MAX_SCOPES = 64;
/** How many containerds (addresses) the agent follows by their events at once. */
const MAX_EVENT_STREAMS = 4;

export const containerdModule: RuntimeModule<ContainerdSettings> = {
  names: ['containerd'],
  settings: containerdSettings,
  make(context, own) {
    const { cli: cliOf } = context;
    const nerdctl = cliOf('nerdctl');
    const watchIn = scopedWatch(nerdctl, context);
    return {
      connectors: new Map([
        [
          'containerd',
          new ContainerdRuntime(
            nerdctl,
            watchIn,
            [...own.scope],
            new ImagePulls(nerdctlPulls(nerdctl), { gc: imageCollector(context, nerdctlImageEngine(nerdctl)), maxCreates: own.maxCreates }),
          ),
        ],
      ]),
      // Asked only while a containerd workload runs (a host without nerdctl is not asked at all).
      figures: (agentName, running) =>
        defer(() =>
          running.findWhere((r) => r.runtime.name === 'containerd')
            ? containerdStats(nerdctl).pipe(
                map((all) =>
                  all.flatMap((c) => {
                    const named = parseInstanceKey(c.Name);
                    return named?.agentName === agentName ? [{ ...c, workload: named.workloadName }] : [];
                  }),
                ),
                catchError(() => of([])),
              )
            : of([]),
        ),
    };
  },
};

/**
 * One cache a scope, made when a workload first needs it; an idle one costs nothing (it follows containerd only
 * while watched). Past MAX_SCOPES the oldest is forgotten. The events come from one `nerdctl events` per
 * containerd (it hears every namespace), shared by the caches of its namespaces; past MAX_EVENT_STREAMS
 * containerds, the scopes of the others are polled.
 */
function scopedWatch(nerdctl: Cli, context: RuntimeContext): (scope: Scope) => WatchState {
  const caches = new Map<string, WatchState>();
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
  return (scope: Scope): WatchState => {
    const key = scope.join('\0');
    let watchState = caches.get(key);
    if (!watchState) {
      if (caches.size >= MAX_SCOPES) caches.delete(caches.keys().next().value!);
      const { namespace, containerd } = splitScope(scope);
      watchState = containerWatch(context, {
        engine: { name: 'containerd', stage: 'containerd.cache' },
        list: () => listContainers(nerdctl, [], scope),
        events$: eventsOf(containerd)?.pipe(filter((e) => e.namespace === namespace)),
      });
      caches.set(key, watchState);
    }
    return watchState;
  };
}
