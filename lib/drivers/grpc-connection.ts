// The gRPC driver: one ConnectAgent stream per subscription.
import * as grpc from '@grpc/grpc-js';
import { fromBinary } from '@bufbuild/protobuf';
import { Observable, type Subscription } from 'rxjs';
import { LINE_1 } from '../codec/lines.js';
import type { ProtocolLine } from '../version.js';
import { agentTlsCredentials } from './tls-credentials.js';
import { type FromServer, FromServerSchema } from '../../proto/gen/grpc_api_pb.js';

export const CONNECT_AGENT_PATH = '/grpc_api.AgentConnection/ConnectAgent';
/** Real Ankaios server certificates are issued for this name, whatever host the URL names. */
export const SERVER_CERT_NAME = 'ank-server';

export type Security = { readonly insecure: true } | { readonly insecure: false; readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer };

export interface ConnectionOptions {
  /** `http://host:port` or `https://host:port`. */
  readonly serverUrl: string;
  readonly security: Security;
  /** HTTP/2 keepalive ping interval: a half-open connection is noticed after about twice this. */
  readonly keepaliveMs?: number;
  /** The protocol line the connection speaks (what the server sends is read as this line writes it). */
  readonly line?: ProtocolLine;
  /** How long a connection may take to come up (a server that is blackholed never answers). */
  readonly connectTimeoutMs?: number;
  /** Hears when the connection cannot take more for now (true) and when it can again (false). */
  readonly onBackpressure?: (full: boolean) => void;
}

export const CONNECT_TIMEOUT_MS = 10_000;

/** Calls `done` when the channel is ready, or with why not: it failed, or did not come up in time. */
function whenReady(channel: ReturnType<grpc.Client['getChannel']>, timeoutMs: number, done: (problem?: string) => void): void {
  const deadline = Date.now() + timeoutMs;
  const check = (): void => {
    const state = channel.getConnectivityState(true);
    // A failed connection goes on to the call too: its error carries the reason (refused, TLS's verdict).
    if (state === grpc.connectivityState.READY || state === grpc.connectivityState.TRANSIENT_FAILURE) done();
    else if (state === grpc.connectivityState.SHUTDOWN) done('the connection was shut down');
    else channel.watchConnectivityState(state, deadline, (err) => (err ? done(`the server did not answer within ${timeoutMs / 1000} s`) : check()));
  };
  check();
}

/** The server ended the stream with a gRPC status; `code` tells why. */
export class ConnectionError extends Error {
  constructor(
    message: string,
    readonly code: grpc.status,
  ) {
    super(message);
  }
}

/** `host:port` of the server URL; without a port, the scheme's. */
export function grpcTarget(serverUrl: string): string {
  const m = /^(https?):\/\/([^/]+)\/?$/.exec(serverUrl.trim());
  if (!m) throw new Error(`The server URL '${serverUrl}' must start with http:// or https:// and name a host.`);
  return /:\d+$/.test(m[2]) ? m[2] : `${m[2]}:${m[1] === 'https' ? 443 : 80}`;
}

function credentials(security: Security): grpc.ChannelCredentials {
  return security.insecure ? grpc.credentials.createInsecure() : agentTlsCredentials(security.ca, security.cert, security.key, SERVER_CERT_NAME);
}

/**
 * Opens the bidirectional ConnectAgent stream when subscribed: writes every message of `outbound$`
 * (half-closing when it completes), emits every message from the server, completes when the server
 * ends the stream and errors with a ConnectionError when it fails. Unsubscribing cancels the call.
 */
/** `outbound$`: encoded grpc_api.ToServer messages (lib/codec/wire.ts). */
export function connectAgent(options: ConnectionOptions, outbound$: Observable<Uint8Array>): Observable<FromServer> {
  return new Observable<FromServer>((subscriber) => {
    const keepalive = options.keepaliveMs ?? 5000;
    const client = new grpc.Client(grpcTarget(options.serverUrl), credentials(options.security), {
      'grpc.keepalive_time_ms': keepalive,
      'grpc.keepalive_timeout_ms': keepalive,
      'grpc.keepalive_permit_without_calls': 1,
      ...(options.security.insecure ? {} : { 'grpc.default_authority': SERVER_CERT_NAME }),
    });
    let call: grpc.ClientDuplexStream<Uint8Array, FromServer> | undefined;
    let writing: Subscription | undefined;
    let ended = false;
    let closed = false;
    let full = false;
    let untilClosed: () => void = () => undefined;
    const write = (m: Uint8Array) => {
      if (ended || call!.write(m) || full) return;
      // grpc buffers what the server does not take yet: say so, and when it drained.
      full = true;
      options.onBackpressure?.(true);
      call!.once('drain', () => {
        full = false;
        options.onBackpressure?.(false);
      });
    };
    whenReady(client.getChannel(), options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS, (problem) => {
      if (closed) return;
      if (problem) {
        ended = true;
        subscriber.error(new ConnectionError(`${problem} (${options.serverUrl})`, grpc.status.UNAVAILABLE));
        return;
      }
      call = client.makeBidiStreamRequest<Uint8Array, FromServer>(
        CONNECT_AGENT_PATH,
        (m) => Buffer.from(m.buffer, m.byteOffset, m.byteLength),
        (b) => fromBinary(FromServerSchema, (options.line ?? LINE_1).read(b)),
      );
      // An open call keeps the process alive: grpc-js unrefs its connection, and a connection that nghttp2
      // closes under the call (a server's header over 64 KiB, such as a very long refusal, which it cannot
      // read) ends the call only when keepalive notices, seconds later; until then nothing else holds the loop.
      const alive = setInterval(() => undefined, 2 ** 30);
      untilClosed = () => clearInterval(alive);
      call.on('data', (m: FromServer) => subscriber.next(m));
      call.on('error', (e: grpc.ServiceError) => {
        ended = true;
        // grpc-js ends a failed connection's details with an empty resolution note.
        subscriber.error(new ConnectionError((e.details || e.message).replace(/\.? *Resolution note: *$/, ''), e.code));
      });
      call.on('end', () => {
        ended = true;
        subscriber.complete();
      });
      // When the outbound stream completes, half-close and let the server end the call.
      writing = outbound$.subscribe({
        next: write,
        error: (e: unknown) => subscriber.error(e),
        complete: () => !ended && call!.end(),
      });
    });
    return () => {
      closed = true;
      untilClosed();
      writing?.unsubscribe();
      if (call && !ended) call.cancel();
      if (full) options.onBackpressure?.(false);
      client.close();
    };
  });
}
