// The gRPC driver: one ConnectAgent stream per subscription (lib/drivers/grpc-call.ts speaks it), its messages'
// bytes read as the protocol line writes them (the link decodes them: lib/codec/wire.ts).
import { Observable } from 'rxjs';
import { LINE_1 } from '../codec/lines.js';
import type { ProtocolLine } from '../version.js';
import { type CallOptions, ConnectionError, GrpcCall, Status, takeEarly } from './grpc-call.js';

export { CONNECT_AGENT_PATH, CONNECT_TIMEOUT_MS, ConnectionError, SERVER_CERT_NAME, type Security, Status, grpcTarget } from './grpc-call.js';

export interface ConnectionOptions extends CallOptions {
  /** The protocol line the connection speaks (what the server sends is read as this line writes it). */
  readonly line?: ProtocolLine;
  /** Hears when the connection cannot take more for now (true) and when it can again (false). */
  readonly onBackpressure?: (full: boolean) => void;
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.byteLength === b.byteLength && Buffer.from(a).equals(Buffer.from(b));

/**
 * Opens the bidirectional ConnectAgent stream when subscribed: writes every message of `outbound$`, emits every
 * message from the server (a FromServer's bytes), completes when the server ends the stream and errors with a
 * ConnectionError when it fails. Unsubscribing, or `outbound$` completing (the agent stops), cancels the call: the
 * server sees the stream reset, and a released server takes only that for an agent gone, not a half-close
 * (swdd~grpc-agent-connection-sends-agent-gone~1).
 * `outbound$`: encoded grpc_api.ToServer messages (lib/codec/wire.ts). The first connection to a server
 * takes over the call the agent opened with its hello before it was loaded, when its first message is that
 * very hello; one whose first message differs is not what the server was told, and fails (the link connects again).
 */
export function connectAgent(options: ConnectionOptions, outbound$: Observable<Uint8Array>): Observable<Uint8Array> {
  return new Observable<Uint8Array>((subscriber) => {
    const line = options.line ?? LINE_1;
    const opened = takeEarly(options.serverUrl);
    let sentHello = opened?.hello;
    const call = opened?.call ?? new GrpcCall(options);
    call.listen({
      message: (bytes) => subscriber.next(line.read(bytes)),
      end: () => subscriber.complete(),
      failed: (error) => subscriber.error(error),
      full: options.onBackpressure,
    });
    const writing = outbound$.subscribe({
      next: (m) => {
        if (sentHello === undefined) {
          void call.write(m);
          return;
        }
        const same = sameBytes(m, sentHello);
        sentHello = undefined;
        if (!same) subscriber.error(new ConnectionError('the hello sent at the start is not the one the agent says now', Status.UNAVAILABLE));
      },
      error: (e: unknown) => subscriber.error(e),
      complete: () => {
        call.cancel();
        subscriber.complete();
      },
    });
    return () => {
      writing.unsubscribe();
      call.cancel();
    };
  });
}
