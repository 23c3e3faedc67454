// Standalone mode: what the server would do for this one agent, fed by manifests instead of gRPC.
import { Observable, defer, filter, map, merge, mergeMap, scan } from 'rxjs';
import type { Logger } from '../lib/logger.js';
import { type DesiredState, diffFor, specsFor } from '../lib/manifest.js';
import type { FromServer, ToServer, WorkloadState } from '../lib/messages.js';
import { instanceKey } from '../lib/workload.js';

export interface LocalSnapshot {
  readonly desired?: DesiredState;
  /** The latest state of every instance of the agent's workloads. */
  readonly states: ReadonlyMap<string, WorkloadState>;
}

type Event = { readonly manifest: DesiredState } | { readonly message: ToServer };

interface Step {
  readonly snapshot: LocalSnapshot;
  readonly out: readonly FromServer[];
}

/** One step of the local server: a new manifest becomes ServerHello (the first) or an UpdateWorkload diff. */
export function localServerStep(agentName: string, snapshot: LocalSnapshot, event: Event): Step {
  if ('manifest' in event) {
    const before = snapshot.desired;
    const next = { ...snapshot, desired: event.manifest };
    if (!before) return { snapshot: next, out: [{ kind: 'serverHello', added: specsFor(agentName, event.manifest) }] };
    const { added, deleted } = diffFor(agentName, before, event.manifest);
    return { snapshot: next, out: added.length + deleted.length > 0 ? [{ kind: 'updateWorkload', added, deleted }] : [] };
  }
  if (event.message.kind === 'updateWorkloadState') {
    const states = new Map(snapshot.states);
    for (const s of event.message.states) {
      if (s.executionState.state === 'Removed') states.delete(instanceKey(s.instanceName));
      else states.set(instanceKey(s.instanceName), s);
    }
    return { snapshot: { ...snapshot, states }, out: [] };
  }
  return { snapshot, out: [] };
}

export interface LocalServerOptions {
  readonly agentName: string;
  readonly log: Logger;
  /** Hears every change of what the local server knows (for the status view). */
  readonly onSnapshot?: (snapshot: LocalSnapshot) => void;
}

/** The FromServer messages the agent gets in standalone mode. */
export function localServer(manifests$: Observable<DesiredState>, outbound$: Observable<ToServer>, options: LocalServerOptions): Observable<FromServer> {
  return defer(() => merge(
    manifests$.pipe(map((manifest): Event => ({ manifest }))),
    outbound$.pipe(map((message): Event => ({ message }))),
  ).pipe(
    scan((step: Step, event: Event) => localServerStep(options.agentName, step.snapshot, event), { snapshot: { states: new Map() }, out: [] } as Step),
    filter((step) => {
      options.onSnapshot?.(step.snapshot);
      return step.out.length > 0;
    }),
    mergeMap((step) => step.out),
  ));
}
