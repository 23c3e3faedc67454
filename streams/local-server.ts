// Standalone mode: what the server would do for this one agent, fed by manifests instead of gRPC.
import { type Observable, defer, filter, map, merge, mergeMap, scan } from 'rxjs';
import { type MessageInitShape, create } from '@bufbuild/protobuf';
import type { Request, ResponseSchema } from '../proto/gen/ank_base_pb.js';
import { ankBase } from '../lib/codec/descriptors.cjs';
import { completeStateTo, declaredStateFrom } from '../lib/codec/wire.js';
import { type AlteredFields, type CompleteState, alteredFields, applyUpdate, maskedState } from '../lib/complete-state.js';
import { keepLatest } from '../lib/execution-state.js';
import type { Logger } from '../lib/logger.js';
import { type DesiredState, diffFor, specsFor } from '../lib/desired-state.js';
import type { FromServer, ToServer } from '../lib/messages.js';
import type { LocalSnapshot } from '../lib/status.js';
import { instanceKey } from '../lib/workload.js';

type Event = { readonly manifest: DesiredState } | { readonly message: ToServer };

/**
 * How many event subscriptions one workload may hold at once. An SDK app opens one or a few; every
 * subscription costs work on each change of the state, so one workload cannot load the agent without end.
 */
export const MAX_SUBSCRIPTIONS_PER_WORKLOAD = 32;

/** A workload's subscription to events: its masks and the part of the state it was last told. */
interface Subscription {
  readonly fieldMask: readonly string[];
  readonly told: CompleteState;
}

/** Subscriptions by the prefixed request id (`<workload>@<id>`) that made them. */
type Subscriptions = ReadonlyMap<string, Subscription>;

interface LocalState {
  readonly snapshot: LocalSnapshot;
  readonly subscriptions: Subscriptions;
}

interface Step extends LocalState {
  readonly out: readonly FromServer[];
}

/**
 * The state under a mask, made once per snapshot and mask: requests and subscriptions between two changes
 * share one object, so comparing what subscribers were told costs one diff per mask, not one per subscriber.
 */
const maskedStates = new WeakMap<LocalSnapshot, Map<string, CompleteState>>();
function maskedOf(agentName: string, snapshot: LocalSnapshot, desired: DesiredState, fieldMask: readonly string[]): CompleteState {
  const key = fieldMask.join('\n');
  let byMask = maskedStates.get(snapshot);
  if (!byMask) {
    byMask = new Map();
    maskedStates.set(snapshot, byMask);
  }
  let state = byMask.get(key);
  if (!state) {
    state = maskedState(agentName, desired, snapshot.states.values(), fieldMask);
    byMask.set(key, state);
  }
  return state;
}

const respond = (requestId: string, content: MessageInitShape<typeof ResponseSchema>['ResponseContent']): FromServer => ({
  kind: 'response',
  response: create(ankBase().ResponseSchema, { requestId, ResponseContent: content }),
});

/** The wire form of a masked state, made once however many answers and events carry it. */
const wireStates = new WeakMap<CompleteState, ReturnType<typeof completeStateTo>>();
const wireOf = (state: CompleteState) => wireStates.get(state) ?? wireStates.set(state, completeStateTo(state)).get(state)!;

const stateResponse = (requestId: string, state: CompleteState, altered?: AlteredFields): FromServer =>
  respond(requestId, { case: 'completeStateResponse', value: { completeState: wireOf(state), alteredFields: altered } });

/**
 * One step of the local server: a new manifest becomes ServerHello (the first) or an UpdateWorkload
 * diff; the agent's states and requests are kept and answered; every change is told to the workloads
 * that subscribed to events on the part of the state it touches.
 */
export function localServerStep(agentName: string, snapshot: LocalSnapshot, event: Event, subscriptions: Subscriptions = new Map()): Step {
  const state = { snapshot, subscriptions };
  const step = 'manifest' in event ? applyManifest(agentName, state, event.manifest) : fromAgent(agentName, state, event.message);
  // Only a change of the state is told: a request that changed nothing costs the subscribers nothing.
  return step.snapshot === snapshot ? step : tellSubscribers(agentName, step);
}

function fromAgent(agentName: string, state: LocalState, message: ToServer): Step {
  const { snapshot } = state;
  if (message.kind === 'updateWorkloadState') {
    const states = new Map(snapshot.states);
    for (const s of message.states) keepLatest(states, instanceKey(s.instanceName), s.executionState, s);
    return { ...state, snapshot: { ...snapshot, states }, out: [] };
  }
  if (message.kind === 'request' && snapshot.desired) return answer(agentName, state, snapshot.desired, message.request as Request);
  return { ...state, out: [] };
}

function applyManifest(agentName: string, state: LocalState, desired: DesiredState): Step {
  const before = state.snapshot.desired;
  // The server ends the subscriptions of workloads that are gone.
  const subscriptions = new Map([...state.subscriptions].filter(([id]) => desired.workloads.has(id.slice(0, id.indexOf('@')))));
  const next = { snapshot: { ...state.snapshot, desired }, subscriptions };
  if (!before) return { ...next, out: [{ kind: 'serverHello', added: specsFor(agentName, desired) }] };
  const { added, deleted } = diffFor(agentName, before, desired);
  return { ...next, out: added.length + deleted.length > 0 ? [{ kind: 'updateWorkload', added, deleted }] : [] };
}

const instanceKeys = (d: DesiredState) => new Set([...d.workloads.values()].map((w) => instanceKey(w.spec.instanceName)));

/** The Control Interface in standalone mode: requests are answered here instead of by a server. */
function answer(agentName: string, state: LocalState, desired: DesiredState, request: Request): Step {
  const id = request.requestId;
  const c = request.RequestContent;
  const only = (out: FromServer): Step => ({ ...state, out: [out] });
  switch (c.case) {
    case 'completeStateRequest': {
      const told = maskedOf(agentName, state.snapshot, desired, c.value.fieldMask);
      // The answer itself carries no altered fields: an SDK takes a response that has them for an event.
      const response = stateResponse(id, told);
      if (!c.value.subscribeForEvents) return only(response);
      const workload = id.slice(0, id.indexOf('@') + 1);
      const held = [...state.subscriptions.keys()].filter((k) => k.startsWith(workload)).length;
      if (held >= MAX_SUBSCRIPTIONS_PER_WORKLOAD) {
        return only(
          respond(id, { case: 'error', value: { message: `At most ${MAX_SUBSCRIPTIONS_PER_WORKLOAD} event subscriptions per workload: cancel one first.` } }),
        );
      }
      return { ...state, subscriptions: new Map(state.subscriptions).set(id, { fieldMask: c.value.fieldMask, told }), out: [response] };
    }
    case 'updateStateRequest': {
      let next: DesiredState;
      try {
        next = applyUpdate(desired, declaredStateFrom(c.value.newState), c.value.updateMask);
      } catch (err) {
        return only(respond(id, { case: 'error', value: { message: `The update is invalid: ${(err as Error).message}` } }));
      }
      const [before, after] = [instanceKeys(desired), instanceKeys(next)];
      const success = respond(id, {
        case: 'UpdateStateSuccess',
        value: {
          addedWorkloads: [...after].filter((k) => !before.has(k)).sort(),
          deletedWorkloads: [...before].filter((k) => !after.has(k)).sort(),
        },
      });
      const step = applyManifest(agentName, state, next);
      return { ...step, out: [success, ...step.out] };
    }
    case 'eventsCancelRequest': {
      const subscriptions = new Map(state.subscriptions);
      subscriptions.delete(id);
      return { ...state, subscriptions, out: [respond(id, { case: 'eventsCancelAccepted', value: {} })] };
    }
    case 'logsCancelRequest':
      return only(respond(id, { case: 'logsCancelAccepted', value: {} }));
    default:
      return only(respond(id, { case: 'error', value: { message: `'${c.case ?? 'empty'}' requests are not available in standalone mode.` } }));
  }
}

/**
 * An event for every subscription whose part of the state the step changed. The masked state is made
 * once per mask and compared once per state told, so subscriptions with the same mask cost one look at
 * the state between them, not one each.
 */
function tellSubscribers(agentName: string, step: Step): Step {
  const { desired } = step.snapshot;
  if (!desired || step.subscriptions.size === 0) return step;
  const changes = new Map<CompleteState, AlteredFields | undefined>();
  const events: FromServer[] = [];
  let subscriptions: Map<string, Subscription> | undefined;
  for (const [id, { fieldMask, told }] of step.subscriptions) {
    const now = maskedOf(agentName, step.snapshot, desired, fieldMask);
    if (!changes.has(told)) {
      const altered = alteredFields(told, now);
      changes.set(told, altered.addedFields.length + altered.updatedFields.length + altered.removedFields.length === 0 ? undefined : altered);
    }
    const altered = changes.get(told);
    if (!altered) continue;
    events.push(stateResponse(id, now, altered));
    subscriptions ??= new Map(step.subscriptions);
    subscriptions.set(id, { fieldMask, told: now });
  }
  return subscriptions ? { ...step, subscriptions, out: [...step.out, ...events] } : step;
}

export interface LocalServerOptions {
  readonly agentName: string;
  readonly log: Logger;
  /** Hears every change of what the local server knows (for the status view). */
  readonly onSnapshot?: (snapshot: LocalSnapshot) => void;
}

/** The FromServer messages the agent gets in standalone mode. */
export function localServer(manifests$: Observable<DesiredState>, outbound$: Observable<ToServer>, options: LocalServerOptions): Observable<FromServer> {
  return defer(() =>
    merge(manifests$.pipe(map((manifest): Event => ({ manifest }))), outbound$.pipe(map((message): Event => ({ message })))).pipe(
      scan((step: Step, event: Event) => localServerStep(options.agentName, step.snapshot, event, step.subscriptions), {
        snapshot: { states: new Map() },
        subscriptions: new Map(),
        out: [],
      } as Step),
      filter((step) => {
        options.onSnapshot?.(step.snapshot);
        return step.out.length > 0;
      }),
      mergeMap((step) => step.out),
    ),
  );
}
