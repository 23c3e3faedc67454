// The Control Interfaces of all workloads: frames from each workload's pipe become sessions and
// requests to the server; the server's responses go back to the workload named before the `@` of
// their request id, written as the line that workload's session speaks writes them.
import { create } from '@bufbuild/protobuf';
import { type Observable, catchError, defer, distinctUntilChanged, endWith, finalize, map, merge, mergeMap, of } from 'rxjs';
import { RequestSchema } from '../proto/gen/ank_base_pb.js';
import { CONTROL_API_FRAMES, type FromAnkaios, FromAnkaiosMessage, type Request, type Response, encodeFromAnkaios } from '../lib/codec/control-api.js';
import type { ProtocolLine } from '../lib/codec/lines.js';
import type { Connection } from '../lib/connection.js';
import type { ControlInterfacePipe, WorkloadFrame } from '../lib/ports.js';
import { controlSession } from './control-interface-session.js';
import { decodeFrames, encodeFrame } from './length-delimited.js';

export type ControlInterfaceOutput =
  | { readonly kind: 'toServer'; readonly request: Request }
  | { readonly kind: 'toWorkload'; readonly frame: WorkloadFrame }
  | { readonly kind: 'log'; readonly level: 'warn' | 'debug'; readonly text: string };

const toWorkload = (workloadName: string, message: FromAnkaios, line: ProtocolLine, logStream?: string): ControlInterfaceOutput => ({
  kind: 'toWorkload',
  frame: { workloadName, bytes: encodeFrame(line.write(encodeFromAnkaios(message))), ...(logStream && { logStream }) },
});

/** How many requests of one workload are kept while the server is unreachable. */
export const MAX_HELD_REQUESTS = 100;
export const SERVER_UNREACHABLE = 'The server is unreachable: the request was not sent.';

interface Open {
  readonly pipe: ControlInterfacePipe;
  /** The line of the workload's open session, if one is open. */
  line?: ProtocolLine;
  /** The event subscriptions (prefixed request ids) the open session made: they end with it. */
  readonly subscriptions: Set<string>;
}

const isSubscription = (r: Request) => r.RequestContent.case === 'completeStateRequest' && r.RequestContent.value.subscribeForEvents;
const eventsCancel = (requestId: string): Request => create(RequestSchema, { requestId, RequestContent: { case: 'eventsCancelRequest', value: {} } });
const logsCancel = (requestId: string): Request => create(RequestSchema, { requestId, RequestContent: { case: 'logsCancelRequest', value: {} } });

export interface ControlInterfaceSources {
  /** Each workload's pipes as they are opened. */
  readonly pipes$: Observable<ControlInterfacePipe>;
  /** The server's responses to the workloads' requests (prefixed request ids). */
  readonly responses$: Observable<Response>;
  /** The server connection: whether it is up, and which protocol lines a workload may speak (replays the latest). */
  readonly connection$: Observable<Connection>;
  /** Frames the pipes could not deliver: the workload is gone from its Control Interface. */
  readonly undelivered$: Observable<WorkloadFrame>;
}

/**
 * The sessions on every opened pipe, and the routing of responses back to them
 * (swdd~agent-forward-responses-to-control-interface-pipe~1). Requests made while the server is not
 * connected are kept, at most MAX_HELD_REQUESTS per workload, and sent when it is again.
 */
export function controlInterfaces({ pipes$, responses$, connection$, undelivered$ }: ControlInterfaceSources): Observable<ControlInterfaceOutput> {
  return defer(() => {
    /** The pipe each workload reads now: a response for any other name has nobody to go to. */
    const open = new Map<string, Open>();
    let online = false;
    const held: Array<{ readonly workloadName: string; readonly request: Request }> = [];
    /** Streams (event subscriptions, log requests) the agent cancelled: what the server still says of them goes nowhere. */
    const ended = new Set<string>();
    /** swdd~agent-handles-control-interface-workload-gone~1: a log stream nobody reads any more is cancelled at the server, once. */
    const cancelLogs = (requestId: string): ControlInterfaceOutput[] => {
      if (ended.has(requestId)) return [];
      ended.add(requestId);
      return [
        toServer(logsCancel(requestId)),
        { kind: 'log', level: 'debug', text: `Cancelled the log stream '${requestId}': its workload is gone from its Control Interface.` },
      ];
    };
    /** A session ends (a new Hello, a close, the pipe gone): so do its subscriptions, at the server too. */
    const endSubscriptions = (entry: Open, line: ProtocolLine | undefined): ControlInterfaceOutput[] => {
      const ids = [...entry.subscriptions];
      entry.subscriptions.clear();
      ids.forEach((id) => ended.add(id));
      return line ? ids.flatMap((id) => hold(entry.pipe.workloadName, eventsCancel(id), line)) : ids.map((id) => toServer(eventsCancel(id)));
    };
    const toServer = (request: Request): ControlInterfaceOutput => ({ kind: 'toServer', request });
    const hold = (workloadName: string, request: Request, line: ProtocolLine): ControlInterfaceOutput[] => {
      if (online) return [toServer(request)];
      if (held.filter((h) => h.workloadName === workloadName).length < MAX_HELD_REQUESTS) {
        held.push({ workloadName, request });
        return [];
      }
      return [toWorkload(workloadName, FromAnkaiosMessage.error(request.requestId.slice(workloadName.length + 1), SERVER_UNREACHABLE), line)];
    };
    const lines$ = connection$.pipe(
      map((c) => c.lines),
      distinctUntilChanged(),
    );
    // What was held is sent when the server is connected again.
    const released$ = connection$.pipe(
      map((c) => c.online),
      distinctUntilChanged(),
      mergeMap((now) => {
        online = now;
        return now ? held.splice(0).map((h) => toServer(h.request)) : [];
      }),
    );
    const sessions$ = pipes$.pipe(
      mergeMap((pipe) => {
        const entry: Open = { pipe, subscriptions: new Set() };
        open.set(pipe.workloadName, entry);
        return controlSession(pipe.workloadName, pipe.access, pipe.chunks$.pipe(decodeFrames(CONTROL_API_FRAMES)), lines$).pipe(
          mergeMap((out): ControlInterfaceOutput[] => {
            if (out.kind === 'line') {
              const ending = endSubscriptions(entry, entry.line);
              entry.line = out.line;
              return ending;
            }
            if (out.kind === 'toServer') {
              const id = out.request.requestId;
              if (isSubscription(out.request)) entry.subscriptions.add(id);
              if (out.request.RequestContent.case === 'eventsCancelRequest') entry.subscriptions.delete(id);
              return hold(pipe.workloadName, out.request, entry.line!);
            }
            return [out.kind === 'toWorkload' ? toWorkload(pipe.workloadName, out.message, out.line) : out];
          }),
          catchError((err: unknown) =>
            of<ControlInterfaceOutput>({ kind: 'log', level: 'warn', text: `The Control Interface of '${pipe.workloadName}' stopped reading: ${String(err)}` }),
          ),
          // The pipe is gone (the workload is): its subscriptions end.
          endWith(null),
          mergeMap((out) => (out === null ? endSubscriptions(entry, undefined) : [out])),
          finalize(() => open.get(pipe.workloadName) === entry && open.delete(pipe.workloadName)),
        );
      }),
    );
    const routed$ = responses$.pipe(
      mergeMap((response): ControlInterfaceOutput[] => {
        const id = response.requestId;
        if (ended.has(id)) {
          if (response.ResponseContent.case === 'eventsCancelAccepted' || response.ResponseContent.case === 'logsCancelAccepted') ended.delete(id);
          return [];
        }
        const routed = route(response, open);
        return (
          routed ?? [
            { kind: 'log', level: 'debug', text: `Dropped a response for '${id}': no open Control Interface session of that workload.` },
            ...(response.ResponseContent.case === 'logEntriesResponse' ? cancelLogs(id) : []),
          ]
        );
      }),
    );
    const gone$ = undelivered$.pipe(mergeMap((frame) => (frame.logStream ? cancelLogs(frame.logStream) : [])));
    return merge(released$, sessions$, routed$, gone$);
  });
}

/**
 * swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1,
 * swdd~agent-remove-id-prefix-forwarding-control-interface-response~1: a response goes to the workload
 * named before the `@` of its request id, without that prefix, if a session of it is open (else: undefined).
 */
function route(response: Response, open: ReadonlyMap<string, Open>): ControlInterfaceOutput[] | undefined {
  const at = response.requestId.indexOf('@');
  const name = at < 0 ? '' : response.requestId.slice(0, at);
  const line = open.get(name)?.line;
  if (!line) return undefined;
  const logStream = response.ResponseContent.case === 'logEntriesResponse' ? response.requestId : undefined;
  return [toWorkload(name, FromAnkaiosMessage.response({ ...response, requestId: response.requestId.slice(at + 1) }), line, logStream)];
}
