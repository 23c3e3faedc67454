// The link to the Ankaios server as an observable: connects when subscribed, says hello first on
// every connection, negotiates the protocol line, reconnects every second for as long as it is wanted.
import { NEVER, Observable, catchError, concat, defer, map, of, repeat, retry, shareReplay, take, takeUntil, throwError, timer } from 'rxjs';
import { PROTOCOL_LINES, lineOfRefusal } from '../lib/codec/lines.js';
import type { ProtocolLine } from '../lib/version.js';
import { encodeAgentHello } from '../lib/codec/hello.js';
import { fromServerBytes, toServerBytes } from '../lib/codec/wire.js';
import type { Logger } from '../lib/logger.js';
import type { FromServer, ToServer } from '../lib/messages.js';

export const RECONNECT_INTERVAL_MS = 1000;
/** gRPC status FAILED_PRECONDITION: the server refuses our protocol version. */
export const FAILED_PRECONDITION = 9;

/** One connection on a protocol line: writes `outbound$` (encoded ToServer messages), emits what the server sends, errors with a `code` on failure. */
export type Connect = (outbound$: Observable<Uint8Array>, line: ProtocolLine) => Observable<Uint8Array>;

/** The server refused the agent; retrying will not help. */
export class ServerRefused extends Error {}

export interface LinkOptions {
  readonly agentName: string;
  readonly log: Logger;
  /** The agent's tags, said in the hello on lines that have them. */
  readonly tags?: Readonly<Record<string, string>>;
  /**
   * Emits once when the agent stops: the link cancels the stream and no longer reconnects. A v1.x server
   * learns that an agent is gone only from a stream that fails (swdd~grpc-agent-connection-sends-agent-gone~1),
   * so no Goodbye and no clean half-close: its workloads then show AgentDisconnected, as with the
   * released agent, whose stream fails when its process ends.
   */
  readonly stop$?: Observable<unknown>;
}

/**
 * swdd~agent-sends-hello~1, swdd~communication-to-from-agent-middleware~1,
 * swdd~agent-manager-listens-requests-from-server~1: the server's messages as values, each connection's
 * first one preceded by `connected` with the line it speaks; `outbound$` is sent on whichever connection
 * is up (messages while none is up are not kept: the agent greets each new connection with its current
 * states). The first hello is of the 1.x line; a server that refuses it naming another line the
 * agent speaks is asked again at once on that line, which is kept for later connections.
 */
export function serverLink(connect: Connect, outbound$: Observable<ToServer>, options: LinkOptions): Observable<FromServer> {
  // Cold: each subscriber negotiates on its own.
  return defer(() => negotiate(connect, outbound$, options));
}

function negotiate(connect: Connect, outbound$: Observable<ToServer>, options: LinkOptions): Observable<FromServer> {
  const { log } = options;
  const stop$ = (options.stop$ ?? NEVER).pipe(take(1), shareReplay(1));
  const wait = () => timer(RECONNECT_INTERVAL_MS).pipe(takeUntil(stop$));
  let line = PROTOCOL_LINES[0];
  /**
   * The lines the server refused since the last connection that was accepted or dropped: when it refused
   * every line the agent speaks, the agent ends. A drop is no refusal (a server may be up- or downgraded
   * meanwhile): negotiation then starts again from the first line.
   */
  const refused = new Set<ProtocolLine>();
  const renegotiate = () => {
    line = PROTOCOL_LINES[0];
    refused.clear();
  };

  // Each connection on the line the negotiation is at; one accepted ends the refusals.
  return defer(() => session(connect, outbound$, line, options, () => refused.clear())).pipe(
    repeat({
      delay: () => {
        log.warn('The server closed the connection; reconnecting.');
        renegotiate();
        return wait();
      },
    }),
    retry({
      delay: (err: { code?: number; message?: string }) => {
        const reason = shortened(err.message ?? String(err));
        if (err.code === FAILED_PRECONDITION) {
          refused.add(line);
          const other = lineOfRefusal(err.message ?? '');
          if (!other || refused.has(other)) return throwError(() => new ServerRefused(`The server refused the agent: ${reason}`));
          log.info(`The server speaks the ${other.name} line, not ${line.name}: asking again with protocol ${other.version}.`);
          line = other;
          return of(0);
        }
        log.warn(`No connection to the server (${reason}); retrying every second.`);
        renegotiate();
        return wait();
      },
    }),
    // Unsubscribing on stop cancels the call (RST_STREAM CANCEL): the stream fails at the server.
    takeUntil(stop$),
  );
}

/**
 * One connection on the line `spoken`: the hello, then the server's messages decoded as they come; `connected`
 * (and `onAccepted`) at the first, `disconnected` when a connection that was accepted ends.
 */
function session(
  connect: Connect,
  outbound$: Observable<ToServer>,
  spoken: ProtocolLine,
  { log, agentName, tags = {} }: LinkOptions,
  onAccepted: () => void,
): Observable<FromServer> {
  if (!spoken.events && Object.keys(tags).length > 0) log.warn(`The ${spoken.name} line has no agent tags: they are not sent.`);
  const hello = encodeAgentHello(agentName, spoken.version, spoken.events ? tags : {});
  const outgoing$ = concat(of(hello), outbound$.pipe(map(toServerBytes)));
  log.debug(`Connecting to the server as agent '${agentName}', protocol ${spoken.version}.`);
  let accepted = false;
  const disconnected = (): FromServer[] => (accepted ? [{ kind: 'disconnected' }] : []);
  // Each message decoded as it comes, no stream made for it (a fleet's states arrive by the thousand).
  const messages$ = new Observable<FromServer>((subscriber) =>
    connect(outgoing$, spoken).subscribe({
      next: (message) => {
        if (!accepted) {
          accepted = true;
          onAccepted();
          log.info(`The server accepted the agent on the ${spoken.name} line (protocol ${spoken.version}).`);
          subscriber.next({ kind: 'connected', lines: [spoken] });
        }
        const m = fromServerBytes(message, (problem) => log.warn(problem));
        if (m) subscriber.next(m);
      },
      error: (err: unknown) => subscriber.error(err),
      complete: () => subscriber.complete(),
    }),
  );
  return concat(messages$, defer(disconnected)).pipe(
    catchError((err: unknown) =>
      concat(
        disconnected(),
        throwError(() => err),
      ),
    ),
  );
}

/** A server's text as the log takes it: whatever its size, one line of sane length. */
const MAX_REASON = 500;
function shortened(text: string): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > MAX_REASON ? `${line.slice(0, MAX_REASON)}… (${line.length} characters)` : line;
}
