// The rules of the workloads' Control Interfaces, as one pure reducer: sessions (Hello first, then
// validated, authorized requests), the requests held while the server is away, event subscriptions that
// end with their session, and the routing of responses back by the prefix of their request id.
// streams/control-interfaces.ts feeds it what the pipes, the server and the connection say, and does the I/O.
import { create } from '@bufbuild/protobuf';
import { ankBase } from '../codec/descriptors.cjs';
import { isAllowed } from '../authorizer.js';
import { type FromAnkaios, FromAnkaiosMessage, type Request, type Response, accessOf, decodeToAnkaios } from '../codec/control-api.js';
import { lineOf } from '../codec/lines.js';
import type { ProtocolLine } from '../version.js';
import { type Connection, NOT_CONNECTED } from './connection.js';
import { type Frame, MAX_FRAME_BYTES } from '../ports.js';
import type { ControlInterfaceAccess } from '../workload.js';

/** What the Control Interfaces hear. A pipe is known by the number it was opened under, so that what an old pipe says never reaches a new session. */
export type ControlInterfaceInput =
  | { readonly kind: 'opened'; readonly pipe: number; readonly workloadName: string; readonly access: ControlInterfaceAccess }
  | { readonly kind: 'frame'; readonly pipe: number; readonly workloadName: string; readonly frame: Frame }
  /** The pipe is gone (the workload is, or its Control Interface was opened anew); `error` when reading it failed. */
  | { readonly kind: 'closed'; readonly pipe: number; readonly workloadName: string; readonly error?: string }
  | { readonly kind: 'connection'; readonly connection: Connection }
  /** The server's response to a workload's request (its id has the workload's prefix). */
  | { readonly kind: 'response'; readonly response: Response }
  /** A log response the workload's input pipe could not take: its reader is gone. */
  | { readonly kind: 'undelivered'; readonly logStream: string };

export type ControlInterfaceEffect =
  | { readonly kind: 'toServer'; readonly request: Request }
  /** A message for the workload, to be written as `line` writes it; `logStream` when it carries log entries. */
  | { readonly kind: 'toWorkload'; readonly workloadName: string; readonly message: FromAnkaios; readonly line: ProtocolLine; readonly logStream?: string }
  | { readonly kind: 'log'; readonly level: 'warn' | 'debug'; readonly text: string }
  /** A request was authorized (allowed) or not (for the metrics). */
  | { readonly kind: 'authorized'; readonly workloadName: string; readonly allowed: boolean };

interface Session {
  readonly pipe: number;
  readonly access: ControlInterfaceAccess;
  /** new: waiting for its Hello; open: speaking `line`; closed: ignoring all but a new Hello. */
  readonly phase: 'new' | 'open' | 'closed';
  readonly line?: ProtocolLine;
  /** The version its Hello said (the message when the server's line changes names it). */
  readonly version: string;
  /** The event subscriptions (prefixed request ids) it made: they end with it. */
  readonly subscriptions: ReadonlySet<string>;
}

export interface ControlInterfacesState {
  /** The session on each workload's open pipe: a response for any other name has nobody to go to. */
  readonly sessions: ReadonlyMap<string, Session>;
  readonly connection: Connection;
  /** Requests made while the server is away, in order, sent when it is back. */
  readonly held: ReadonlyArray<{ readonly workloadName: string; readonly request: Request }>;
  /** Streams (event subscriptions, log requests) the agent cancelled: what the server still says of them goes nowhere. */
  readonly ended: ReadonlySet<string>;
}

export interface ControlInterfacesStep {
  readonly state: ControlInterfacesState;
  readonly effects: readonly ControlInterfaceEffect[];
}

export const NO_CONTROL_INTERFACES: ControlInterfacesState = { sessions: new Map(), connection: NOT_CONNECTED, held: [], ended: new Set() };

/** How many requests of one workload are kept while the server is unreachable. */
export const MAX_HELD_REQUESTS = 100;
export const SERVER_UNREACHABLE = 'The server is unreachable: the request was not sent.';
/** The released agent's words. */
export const INITIAL_HELLO_MISSING = 'Initial Hello missing!';
export const UNDECODABLE = 'Could not decode protobuf data';
export const ACCESS_DENIED = 'Access denied';

/** The workload name in front of request ids on the way to the server (swdd~agent-adds-workload-prefix-id-control-interface-request~1). */
export const prefixed = (workloadName: string, requestId: string) => `${workloadName}@${requestId}`;

const unsupported = (version: string, lines: readonly ProtocolLine[]) =>
  `Unsupported protocol version '${version}'. Currently supported '${lines.map((l) => l.name).join("', '")}'`;
const isSubscription = (r: Request) => r.RequestContent.case === 'completeStateRequest' && r.RequestContent.value.subscribeForEvents;
const eventsCancel = (requestId: string): Request => create(ankBase().RequestSchema, { requestId, RequestContent: { case: 'eventsCancelRequest', value: {} } });
const logsCancel = (requestId: string): Request => create(ankBase().RequestSchema, { requestId, RequestContent: { case: 'logsCancelRequest', value: {} } });
const toServer = (request: Request): ControlInterfaceEffect => ({ kind: 'toServer', request });
const log = (level: 'warn' | 'debug', text: string): ControlInterfaceEffect => ({ kind: 'log', level, text });
const unchanged = (state: ControlInterfacesState): ControlInterfacesStep => ({ state, effects: [] });

/**
 * swdd~agent-listens-for-requests-from-pipe~1, swdd~agent-forward-responses-to-control-interface-pipe~1:
 * the next state of the Control Interfaces and what to send where.
 */
export function stepControlInterfaces(state: ControlInterfacesState, input: ControlInterfaceInput): ControlInterfacesStep {
  switch (input.kind) {
    case 'opened': {
      // A session of an older pipe still there ends as if its pipe were gone.
      const old = state.sessions.get(input.workloadName);
      const before = old ? onClosed(state, input.workloadName, old.pipe) : unchanged(state);
      const session: Session = { pipe: input.pipe, access: input.access, phase: 'new', version: '', subscriptions: new Set() };
      return { ...before, state: { ...before.state, sessions: new Map(before.state.sessions).set(input.workloadName, session) } };
    }
    case 'frame': {
      const session = state.sessions.get(input.workloadName);
      return session?.pipe === input.pipe ? onFrame(state, input.workloadName, session, input.frame) : unchanged(state);
    }
    case 'closed':
      return onClosed(state, input.workloadName, input.pipe, input.error);
    case 'connection':
      return onConnection(state, input.connection);
    case 'response':
      return onResponse(state, input.response);
    case 'undelivered':
      // swdd~agent-handles-control-interface-workload-gone~1
      return cancelLogs(state, input.logStream, 'its workload is gone from its Control Interface');
  }
}

/** A session's next state, with what it says. */
type SessionStep = { readonly session: Session; readonly effects: ControlInterfaceEffect[] };

/**
 * swdd~agent-converts-control-interface-message-to-ankaios-object~1: a session is opened by a Hello of one
 * of the lines the connection allows (the server's line; every line in standalone mode) and closed by
 * anything else before it; a closed session ignores all but a new Hello, which starts it again.
 */
function onFrame(state: ControlInterfacesState, workloadName: string, session: Session, frame: Frame): ControlInterfacesStep {
  const message = frame.kind === 'frame' ? decodeToAnkaios(frame.bytes) : undefined;
  const content = message?.ToAnkaiosEnum;
  const lines = state.connection.lines;
  const say = (effects: ControlInterfaceEffect[]) => ({ state, effects });
  if (content?.case === 'hello') {
    const version = content.value.protocolVersion;
    const line = lineOf(version, lines);
    if (!line) return restart(state, workloadName, session, close(workloadName, { ...session, version }, unsupported(version, lines), lines));
    const opened: Session = { ...session, phase: 'open', line, version };
    return restart(state, workloadName, session, {
      session: opened,
      effects: [
        { kind: 'toWorkload', workloadName, message: FromAnkaiosMessage.accepted(), line },
        log('debug', `Control Interface of '${workloadName}' accepted (version ${version}, the ${line.name} line).`),
      ],
    });
  }
  if (session.phase === 'closed') return say([log('debug', `Ignored data on the closed Control Interface of '${workloadName}' until a new Hello.`)]);
  // An accepted session goes on after a frame too large to take, as with the released agent (which reads any size).
  if (frame.kind === 'oversized' && session.phase === 'open')
    return say([log('warn', `Skipped a message of ${frame.size} bytes of '${workloadName}': over ${MAX_FRAME_BYTES} bytes.`)]);
  // Lost framing cannot be trusted again before a Hello; a frame that does not decode is skipped once a session is open.
  if (frame.kind !== 'frame' || (!message && session.phase === 'new'))
    return restart(state, workloadName, session, close(workloadName, session, UNDECODABLE, lines));
  if (!message) return say([log('warn', `Skipped a frame of '${workloadName}' that does not decode as a Control Interface message.`)]);
  if (session.phase === 'new') return restart(state, workloadName, session, close(workloadName, session, INITIAL_HELLO_MISSING, lines));
  if (content?.case !== 'request') return say([log('warn', `Skipped a message of '${workloadName}' that is neither Hello nor request.`)]);
  return onRequest(state, workloadName, session, content.value);
}

/** Closes a session: the workload is told why, in the line it spoke (or the connection's first). */
function close(workloadName: string, session: Session, reason: string, lines: readonly ProtocolLine[]): SessionStep {
  return {
    session: { ...session, phase: 'closed', line: undefined },
    effects: [
      { kind: 'toWorkload', workloadName, message: FromAnkaiosMessage.closed(reason), line: session.line ?? lines[0] },
      log('warn', `Closed the Control Interface of '${workloadName}': ${reason}`),
    ],
  };
}

/**
 * A session starts anew or closes (a new Hello, a close): the event subscriptions it made end, at the
 * server too (in the line it spoke: held like any request while the server is away).
 */
function restart(state: ControlInterfacesState, workloadName: string, before: Session, step: SessionStep): ControlInterfacesStep {
  const session = { ...step.session, subscriptions: new Set<string>() };
  const ids = [...before.subscriptions];
  const next: ControlInterfacesStep = {
    state: { ...state, sessions: new Map(state.sessions).set(workloadName, session), ended: ids.length ? new Set([...state.ended, ...ids]) : state.ended },
    effects: step.effects,
  };
  const line = before.line;
  return line ? ids.reduce((acc, id) => then(acc, (s) => hold(s, workloadName, eventsCancel(id), line)), next) : next;
}

/** Runs `step` on the state `first` left, adding its effects after those of `first`. */
function then(first: ControlInterfacesStep, step: (state: ControlInterfacesState) => ControlInterfacesStep): ControlInterfacesStep {
  const second = step(first.state);
  return { state: second.state, effects: [...first.effects, ...second.effects] };
}

/**
 * swdd~agent-forward-request-from-control-interface-pipe-to-server~2, swdd~agent-checks-request-for-authorization~1:
 * a request is validated and authorized; allowed, it goes to the server with the workload's prefix.
 */
function onRequest(state: ControlInterfacesState, workloadName: string, session: Session, r: Request): ControlInterfacesStep {
  const line = session.line!;
  const answer = (m: FromAnkaios, text: string): ControlInterfacesStep => ({
    state,
    effects: [{ kind: 'toWorkload', workloadName, message: m, line }, log('debug', `Request '${r.requestId}' of '${workloadName}': ${text}`)],
  });
  const c = r.RequestContent;
  // Nothing a server cannot read may reach it: a 0.8 server drops the agent's whole connection on it.
  // The released agent's authorizer denies a request it cannot read.
  if (c.case === undefined) return answer(FromAnkaiosMessage.error(r.requestId, ACCESS_DENIED), 'empty, refused');
  if (!line.events && c.case === 'eventsCancelRequest') {
    const accepted = create(ankBase().ResponseSchema, { requestId: r.requestId, ResponseContent: { case: 'eventsCancelAccepted', value: {} } });
    return answer(FromAnkaiosMessage.response(accepted), 'no events on this line, answered here');
  }
  if (!line.events && c.case === 'completeStateRequest' && c.value.subscribeForEvents) {
    return answer(FromAnkaiosMessage.error(r.requestId, `Events are not available on the ${line.name} line.`), 'events refused');
  }
  const wanted = accessOf(r);
  if (!wanted || !isAllowed(session.access, wanted)) {
    const denied = answer(FromAnkaiosMessage.error(r.requestId, ACCESS_DENIED), `denied (${wanted?.kind ?? 'unknown'})`);
    return { ...denied, effects: [...denied.effects, { kind: 'authorized', workloadName, allowed: false }] };
  }
  const request: Request = { ...r, requestId: prefixed(workloadName, r.requestId) };
  // Only a subscription or its cancel changes the session: a plain request copies nothing.
  const id = request.requestId;
  const subscribes = isSubscription(request) && !session.subscriptions.has(id);
  const cancels = c.case === 'eventsCancelRequest' && session.subscriptions.has(id);
  const subscriptions = subscribes ? new Set(session.subscriptions).add(id) : cancels ? new Set([...session.subscriptions].filter((s) => s !== id)) : undefined;
  const next = subscriptions ? { ...state, sessions: new Map(state.sessions).set(workloadName, { ...session, subscriptions }) } : state;
  const held = hold(next, workloadName, request, line);
  return { ...held, effects: [{ kind: 'authorized', workloadName, allowed: true }, ...held.effects] };
}

/** A request for the server: sent while it is connected, else held (at most MAX_HELD_REQUESTS per workload, then refused). */
function hold(state: ControlInterfacesState, workloadName: string, request: Request, line: ProtocolLine): ControlInterfacesStep {
  if (state.connection.online) return { state, effects: [toServer(request)] };
  if (state.held.filter((h) => h.workloadName === workloadName).length < MAX_HELD_REQUESTS)
    return unchanged({ ...state, held: [...state.held, { workloadName, request }] });
  const unprefixed = request.requestId.slice(workloadName.length + 1);
  return { state, effects: [{ kind: 'toWorkload', workloadName, message: FromAnkaiosMessage.error(unprefixed, SERVER_UNREACHABLE), line }] };
}

/** The pipe is gone: its session ends, and with it its subscriptions (cancelled at the server at once). */
function onClosed(state: ControlInterfacesState, workloadName: string, pipe: number, error?: string): ControlInterfacesStep {
  const effects = error ? [log('warn', `The Control Interface of '${workloadName}' stopped reading: ${error}`)] : [];
  const session = state.sessions.get(workloadName);
  if (session?.pipe !== pipe) return { state, effects };
  const sessions = new Map(state.sessions);
  sessions.delete(workloadName);
  const ids = [...session.subscriptions];
  return { state: { ...state, sessions, ended: new Set([...state.ended, ...ids]) }, effects: [...effects, ...ids.map((id) => toServer(eventsCancel(id)))] };
}

/**
 * A new connection: what was held is sent when the server is back; a session whose line the server no
 * longer speaks is closed.
 */
function onConnection(state: ControlInterfacesState, connection: Connection): ControlInterfacesStep {
  const online = connection.online && !state.connection.online;
  let next: ControlInterfacesStep = {
    state: { ...state, connection, held: online ? [] : state.held },
    effects: online ? state.held.map((h) => toServer(h.request)) : [],
  };
  if (connection.lines === state.connection.lines) return next;
  for (const [workloadName, session] of state.sessions) {
    if (session.phase !== 'open' || !session.line || connection.lines.includes(session.line)) continue;
    next = then(next, (s) => restart(s, workloadName, session, close(workloadName, session, unsupported(session.version, connection.lines), connection.lines)));
  }
  return next;
}

/**
 * swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1,
 * swdd~agent-remove-id-prefix-forwarding-control-interface-response~1: a response goes to the workload
 * named before the `@` of its request id, without that prefix, if a session of it is open. A log response
 * that has nobody to go to cancels its stream at the server.
 */
function onResponse(state: ControlInterfacesState, response: Response): ControlInterfacesStep {
  const id = response.requestId;
  if (state.ended.has(id)) {
    const confirmed = response.ResponseContent.case === 'eventsCancelAccepted' || response.ResponseContent.case === 'logsCancelAccepted';
    if (!confirmed) return unchanged(state);
    const ended = new Set(state.ended);
    ended.delete(id);
    return unchanged({ ...state, ended });
  }
  const at = id.indexOf('@');
  const workloadName = at < 0 ? '' : id.slice(0, at);
  const line = state.sessions.get(workloadName)?.line;
  const isLogs = response.ResponseContent.case === 'logEntriesResponse';
  if (!line) {
    const dropped: ControlInterfacesStep = {
      state,
      effects: [log('debug', `Dropped a response for '${id}': no open Control Interface session of that workload.`)],
    };
    return isLogs ? then(dropped, (s) => cancelLogs(s, id, 'its workload has no open Control Interface session')) : dropped;
  }
  const message = FromAnkaiosMessage.response({ ...response, requestId: id.slice(at + 1) });
  return { state, effects: [{ kind: 'toWorkload', workloadName, message, line, ...(isLogs && { logStream: id }) }] };
}

/** A log stream nobody reads any more is cancelled at the server, once. */
function cancelLogs(state: ControlInterfacesState, requestId: string, why: string): ControlInterfacesStep {
  if (state.ended.has(requestId)) return unchanged(state);
  return {
    state: { ...state, ended: new Set(state.ended).add(requestId) },
    effects: [toServer(logsCancel(requestId)), log('debug', `Cancelled the log stream '${requestId}': ${why}.`)],
  };
}
