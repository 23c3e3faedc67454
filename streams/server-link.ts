// The link to the Ankaios server as an observable: connects when subscribed, says hello first on
// every connection, reconnects every second for as long as it is wanted.
import {
  EMPTY, NEVER, Observable, concat, concatMap, defer, map, of, repeat, retry, shareReplay,
  take, takeUntil, throwError, timer,
} from 'rxjs';
import type * as grpc from '../proto/gen/grpc_api_pb.js';
import { MalformedMessage, agentHello, fromServerMessage, toServerMessage } from '../lib/codec/wire.js';
import type { Logger } from '../lib/logger.js';
import type { FromServer, ToServer } from '../lib/messages.js';
import { PROTOCOL_VERSION } from '../lib/version.js';

export const RECONNECT_INTERVAL_MS = 1000;
/** gRPC status FAILED_PRECONDITION: the server refuses our protocol version. */
export const FAILED_PRECONDITION = 9;

/** One connection: writes `outbound$`, emits what the server sends, errors with a `code` on failure. */
export type Connect = (outbound$: Observable<grpc.ToServer>) => Observable<grpc.FromServer>;

/** The server refused the agent; retrying will not help. */
export class ServerRefused extends Error {}

export interface LinkOptions {
  readonly agentName: string;
  readonly log: Logger;
  /** Messages to send right after AgentHello on each connection (e.g. the current workload states). */
  readonly greeting?: () => readonly ToServer[];
  /** Emits once when the agent stops: the link says Goodbye, closes and no longer reconnects. */
  readonly stop$?: Observable<unknown>;
}

/**
 * swdd~agent-sends-hello~1, swdd~communication-to-from-agent-middleware~1,
 * swdd~agent-manager-listens-requests-from-server~1: the server's messages as values; `outbound$` is
 * sent on whichever connection is up (messages while none is up are not kept: the greeting of the
 * next connection brings the server up to date).
 */
export function serverLink(connect: Connect, outbound$: Observable<ToServer>, options: LinkOptions): Observable<FromServer> {
  const { log } = options;
  const stop$ = (options.stop$ ?? NEVER).pipe(take(1), shareReplay(1));
  // On stop, Goodbye ends the outbound stream, which half-closes the call.
  const goodbye$ = stop$.pipe(map((): ToServer => ({ kind: 'goodbye' })));
  const wait = () => timer(RECONNECT_INTERVAL_MS).pipe(takeUntil(stop$));

  const session$ = defer(() => {
    const outgoing$ = concat(
      of(agentHello(options.agentName, PROTOCOL_VERSION)),
      defer(() => (options.greeting?.() ?? []).map(toServerMessage)),
      concat(outbound$.pipe(takeUntil(stop$)), goodbye$).pipe(map(toServerMessage)),
    );
    log.debug(`Connecting to the server as agent '${options.agentName}'.`);
    return connect(outgoing$);
  });

  return session$.pipe(
    concatMap((message) => {
      try {
        const m = fromServerMessage(message);
        return m ? of(m) : EMPTY;
      } catch (err) {
        if (!(err instanceof MalformedMessage)) throw err;
        log.warn(`Ignored a message from the server with ${err.message}.`);
        return EMPTY;
      }
    }),
    repeat({ delay: () => (log.warn('The server closed the connection; reconnecting.'), wait()) }),
    retry({
      delay: (err: { code?: number; message?: string }) => {
        if (err.code === FAILED_PRECONDITION) return throwError(() => new ServerRefused(`The server refused the agent: ${err.message}`));
        log.warn(`No connection to the server (${err.message ?? String(err)}); retrying every second.`);
        return wait();
      },
    }),
  );
}
