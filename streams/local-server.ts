// Standalone mode: what the server would do for this one agent, fed by manifests instead of gRPC.
import { Observable, defer, filter, map, merge, mergeMap, scan } from 'rxjs';
import { type MessageInitShape, create } from '@bufbuild/protobuf';
import { type Request, ResponseSchema } from '../proto/gen/ank_base_pb.js';
import { applyUpdate, completeState } from '../lib/complete-state.js';
import type { Logger } from '../lib/logger.js';
import { type DesiredState, diffFor, specsFor } from '../lib/manifest.js';
import type { LocalSnapshot } from '../lib/status.js';
import { keepLatest } from '../lib/execution-state.js';
import type { FromServer, ToServer } from '../lib/messages.js';
import { instanceKey } from '../lib/workload.js';


type Event = { readonly manifest: DesiredState } | { readonly message: ToServer };

interface Step {
  readonly snapshot: LocalSnapshot;
  readonly out: readonly FromServer[];
}

/** One step of the local server: a new manifest becomes ServerHello (the first) or an UpdateWorkload diff. */
export function localServerStep(agentName: string, snapshot: LocalSnapshot, event: Event): Step {
  if ('manifest' in event) return applyManifest(agentName, snapshot, event.manifest);
  const message = event.message;
  if (message.kind === 'updateWorkloadState') {
    const states = new Map(snapshot.states);
    for (const s of message.states) keepLatest(states, instanceKey(s.instanceName), s.executionState, s);
    return { snapshot: { ...snapshot, states }, out: [] };
  }
  if (message.kind === 'request' && snapshot.desired) return answer(agentName, snapshot, snapshot.desired, message.request as Request);
  return { snapshot, out: [] };
}

function applyManifest(agentName: string, snapshot: LocalSnapshot, desired: DesiredState): Step {
  const before = snapshot.desired;
  const next = { ...snapshot, desired };
  if (!before) return { snapshot: next, out: [{ kind: 'serverHello', added: specsFor(agentName, desired) }] };
  const { added, deleted } = diffFor(agentName, before, desired);
  return { snapshot: next, out: added.length + deleted.length > 0 ? [{ kind: 'updateWorkload', added, deleted }] : [] };
}

const respond = (requestId: string, content: MessageInitShape<typeof ResponseSchema>['ResponseContent']): FromServer =>
  ({ kind: 'response', response: create(ResponseSchema, { requestId, ResponseContent: content }) });

const instanceKeys = (d: DesiredState) => new Set([...d.workloads.values()].map((w) => instanceKey(w.spec.instanceName)));

/** The Control Interface in standalone mode: requests are answered here instead of by a server. */
function answer(agentName: string, snapshot: LocalSnapshot, desired: DesiredState, request: Request): Step {
  const id = request.requestId;
  const c = request.RequestContent;
  switch (c.case) {
    case 'completeStateRequest':
      return { snapshot, out: [respond(id, { case: 'completeState', value: completeState(agentName, desired, snapshot.states.values(), c.value.fieldMask) })] };
    case 'updateStateRequest': {
      let next: DesiredState;
      try {
        next = applyUpdate(desired, c.value.newState, c.value.updateMask);
      } catch (err) {
        return { snapshot, out: [respond(id, { case: 'error', value: { message: `The update is invalid: ${(err as Error).message}` } })] };
      }
      const [before, after] = [instanceKeys(desired), instanceKeys(next)];
      const success = respond(id, { case: 'UpdateStateSuccess', value: {
        addedWorkloads: [...after].filter((k) => !before.has(k)).sort(),
        deletedWorkloads: [...before].filter((k) => !after.has(k)).sort(),
      } });
      const step = applyManifest(agentName, snapshot, next);
      return { snapshot: step.snapshot, out: [success, ...step.out] };
    }
    case 'logsCancelRequest':
      return { snapshot, out: [respond(id, { case: 'logsCancelAccepted', value: {} })] };
    default:
      return { snapshot, out: [respond(id, { case: 'error', value: { message: `'${c.case ?? 'empty'}' requests are not available in standalone mode.` } })] };
  }
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
