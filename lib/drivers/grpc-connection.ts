// The gRPC driver: one ConnectAgent stream per subscription, spoken on Node's own HTTP/2. The agent needs one
// bidirectional call and nothing else of a gRPC library: gRPC's framing (a flag byte and a length before each
// message), its status in the trailers, and keepalive pings. @grpc/grpc-js would cost the agent's start ~70 ms of
// loading before its hello could be sent (README "Why not these packages").
import http2 from 'node:http2';
import tls from 'node:tls';
import { fromBinary } from '@bufbuild/protobuf';
import { Observable, type Subscription } from 'rxjs';
import { LINE_1 } from '../codec/lines.js';
import type { ProtocolLine } from '../version.js';
import { certificatesOf, serverCertificateProblem } from './tls-credentials.js';
import { type FromServer, FromServerSchema } from '../../proto/gen/grpc_api_pb.js';

export const CONNECT_AGENT_PATH = '/grpc_api.AgentConnection/ConnectAgent';
/** Real Ankaios server certificates are issued for this name, whatever host the URL names. */
export const SERVER_CERT_NAME = 'ank-server';

export type Security = { readonly insecure: true } | { readonly insecure: false; readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer };

/** gRPC's status codes the agent tells apart (the rest pass through as numbers). */
export const Status = { OK: 0, CANCELLED: 1, UNKNOWN: 2, INTERNAL: 13, UNAVAILABLE: 14, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9 } as const;

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
/** The largest message taken from the server (gRPC's default receive limit). */
export const MAX_MESSAGE_BYTES = 4 * 2 ** 20;

/** The server ended the stream with a gRPC status, or the connection failed (UNAVAILABLE); `code` tells why. */
export class ConnectionError extends Error {
  constructor(
    message: string,
    readonly code: number,
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

/** gRPC's framing of one message: not compressed, its length, the bytes. */
export function frame(message: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(5 + message.byteLength);
  framed[0] = 0;
  framed.writeUInt32BE(message.byteLength, 1);
  framed.set(message, 5);
  return framed;
}

/** Cuts gRPC frames out of what arrives, however it is split; a frame that is compressed or too large is an error. */
export class Deframer {
  private pending: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly maxBytes = MAX_MESSAGE_BYTES) {}

  push(chunk: Buffer): Buffer[] {
    this.pending.push(chunk);
    this.bytes += chunk.length;
    const messages: Buffer[] = [];
    while (this.bytes >= 5) {
      const head = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending);
      this.pending = [head];
      if (head[0] !== 0) throw new ConnectionError('the server sent a compressed message, which the agent did not ask for', Status.INTERNAL);
      const length = head.readUInt32BE(1);
      if (length > this.maxBytes)
        throw new ConnectionError(`the server sent a message of ${length} bytes, over the limit of ${this.maxBytes}`, Status.RESOURCE_EXHAUSTED);
      if (this.bytes < 5 + length) break;
      messages.push(head.subarray(5, 5 + length));
      const rest = head.subarray(5 + length);
      this.pending = rest.length > 0 ? [rest] : [];
      this.bytes = rest.length;
    }
    return messages;
  }
}

/** A `grpc-message` as gRPC writes it (percent-encoded). */
const decodeMessage = (text: string): string => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};

/** The HTTP status of a response that is no gRPC answer, as gRPC maps it. */
const fromHttpStatus = (status: number): number => ({ 400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14 })[status] ?? Status.UNKNOWN;

/** The TLS connection an agent makes: its certificate alone, the server's checked against the CA for SERVER_CERT_NAME (lib/drivers/tls-credentials.ts). */
function tlsConnection(host: string, port: number, security: Security & { insecure: false }, refused: (problem: string) => void): tls.TLSSocket {
  const anchors = certificatesOf(security.ca);
  // Not rejected by Node (it has no CA to check with): checked on connect instead, before a byte of gRPC is sent.
  const socket = tls.connect({
    host,
    port,
    secureContext: tls.createSecureContext({ cert: security.cert, key: security.key }),
    servername: SERVER_CERT_NAME,
    ALPNProtocols: ['h2'],
    rejectUnauthorized: false,
  });
  socket.once('secureConnect', () => {
    const problem = serverCertificateProblem(socket.getPeerCertificate(true), anchors, SERVER_CERT_NAME);
    if (problem) refused(`The server's certificate is refused: ${problem}.`);
  });
  return socket;
}

/**
 * Opens the bidirectional ConnectAgent stream when subscribed: writes every message of `outbound$`
 * (half-closing when it completes), emits every message from the server, completes when the server
 * ends the stream and errors with a ConnectionError when it fails. Unsubscribing cancels the call (the
 * server sees the stream reset: swdd~grpc-agent-connection-sends-agent-gone~1).
 * `outbound$`: encoded grpc_api.ToServer messages (lib/codec/wire.ts).
 */
export function connectAgent(options: ConnectionOptions, outbound$: Observable<Uint8Array>): Observable<FromServer> {
  return new Observable<FromServer>((subscriber) => {
    const keepaliveMs = options.keepaliveMs ?? 5000;
    const target = grpcTarget(options.serverUrl);
    const at = target.lastIndexOf(':');
    const [host, port] = [target.slice(0, at).replace(/^\[|\]$/g, ''), Number(target.slice(at + 1))];
    const line = options.line ?? LINE_1;
    let over = false;
    let full = false;
    let status: { code: number; message: string } | undefined;
    let connecting: NodeJS.Timeout | undefined;
    let pinging: NodeJS.Timeout | undefined;
    let unanswered: NodeJS.Timeout | undefined;
    const fail = (message: string, code: number = Status.UNAVAILABLE) => {
      if (over) return;
      over = true;
      subscriber.error(new ConnectionError(message, code));
    };
    const security = options.security;
    const session = http2.connect(
      `http://${target}`,
      security.insecure ? {} : { createConnection: () => tlsConnection(host, port, security, (problem) => session.destroy(new Error(problem))) },
    );
    session.on('error', (err: NodeJS.ErrnoException) =>
      fail(err.code === 'ECONNREFUSED' || err.code === 'ENOTFOUND' ? `${err.message} (${options.serverUrl})` : err.message),
    );
    // A connection that does not come up in time (a server that is blackholed never answers).
    const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    connecting = setTimeout(() => fail(`the server did not answer within ${connectTimeoutMs / 1000} s (${options.serverUrl})`), connectTimeoutMs);
    // Up once the server has spoken HTTP/2 (its settings): a socket that connects and stays silent is not a server.
    session.once('remoteSettings', () => {
      clearTimeout(connecting);
      // Keepalive: a ping not answered within its interval means the connection is half-open.
      pinging = setInterval(() => {
        if (unanswered !== undefined || session.destroyed) return;
        unanswered = setTimeout(() => {
          fail('the server did not answer a keepalive ping: the connection is lost');
          session.destroy();
        }, keepaliveMs);
        session.ping(() => {
          clearTimeout(unanswered);
          unanswered = undefined;
        });
      }, keepaliveMs);
    });
    const stream = session.request(
      {
        ':method': 'POST',
        ':path': CONNECT_AGENT_PATH,
        ':authority': security.insecure ? target : SERVER_CERT_NAME,
        'content-type': 'application/grpc',
        te: 'trailers',
      },
      { endStream: false },
    );
    const deframer = new Deframer();
    const takeStatus = (headers: http2.IncomingHttpHeaders) => {
      if (headers['grpc-status'] === undefined) return;
      status = { code: Number(headers['grpc-status']), message: decodeMessage(String(headers['grpc-message'] ?? '')) };
    };
    stream.on('response', (headers) => {
      const http = Number(headers[':status']);
      if (http !== 200) fail(`the server answered HTTP ${http}`, fromHttpStatus(http));
      else takeStatus(headers);
    });
    stream.on('trailers', takeStatus);
    stream.on('data', (chunk: Buffer) => {
      if (over) return;
      try {
        for (const message of deframer.push(chunk)) subscriber.next(fromBinary(FromServerSchema, line.read(message)));
      } catch (err) {
        fail((err as Error).message, err instanceof ConnectionError ? err.code : Status.INTERNAL);
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }
    });
    stream.on('error', (err: Error) => fail(err.message));
    // The server's side ended: its status (in the trailers, or in the headers of an answer without messages) says how.
    stream.on('end', () => {
      if (over) return;
      if (status?.code === Status.OK) {
        over = true;
        subscriber.complete();
      } else if (status) fail(status.message || `the server ended the stream with status ${status.code}`, status.code);
      else fail('the server ended the stream without a status');
    });
    stream.on('close', () => fail(session.destroyed ? 'the connection closed' : `the stream was reset by the server (code ${stream.rstCode})`));
    // An open call keeps the process alive, even while nothing else holds the loop.
    const alive = setInterval(() => undefined, 2 ** 30);
    const writing: Subscription = outbound$.subscribe({
      next: (m) => {
        if (over || stream.write(frame(m)) || full) return;
        // HTTP/2 holds what the server does not take yet: say so, and when it drained.
        full = true;
        options.onBackpressure?.(true);
        stream.once('drain', () => {
          full = false;
          options.onBackpressure?.(false);
        });
      },
      error: (e: unknown) => subscriber.error(e),
      complete: () => !over && stream.end(),
    });
    return () => {
      over = true;
      for (const timer of [connecting, pinging, unanswered, alive]) clearTimeout(timer);
      writing.unsubscribe();
      // A reset, not a half-close: a released server takes a stream that fails for an agent that is gone.
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      if (full) options.onBackpressure?.(false);
      session.close();
    };
  });
}
