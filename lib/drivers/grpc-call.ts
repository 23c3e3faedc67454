// One gRPC call of the agent (ConnectAgent), spoken on Node's own HTTP/2: gRPC's framing (a flag byte and a
// length before each message), its status in the trailers, keepalive pings, and the mTLS a released server
// takes. No protobuf and no RxJS here: a call can be opened, and the hello written, before the agent loads
// them (bin/main.ts), and what the server sends meanwhile is kept until the connection takes the call over
// (lib/drivers/grpc-connection.ts). @grpc/grpc-js would cost the start ~70 ms of loading (README).
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { certificatesOf, serverCertificateProblem } from './tls-credentials.js';

export const CONNECT_AGENT_PATH = '/grpc_api.AgentConnection/ConnectAgent';
/** Real Ankaios server certificates are issued for this name, whatever host the URL names. */
export const SERVER_CERT_NAME = 'ank-server';

export type Security = { readonly insecure: true } | { readonly insecure: false; readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer };

/** gRPC's status codes the agent tells apart (the rest pass through as numbers). */
export const Status = { OK: 0, UNKNOWN: 2, RESOURCE_EXHAUSTED: 8, INTERNAL: 13, UNAVAILABLE: 14 } as const;

/** How long a connection may take to come up: gRPC's least connect timeout (a busy node answers late; a blackholed server never). */
export const CONNECT_TIMEOUT_MS = 20_000;
/** The largest message taken from the server (gRPC's default receive limit). */
export const MAX_MESSAGE_BYTES = 4 * 2 ** 20;

export interface CallOptions {
  /** `http://host:port` or `https://host:port`. */
  readonly serverUrl: string;
  readonly security: Security;
  /** HTTP/2 keepalive ping interval (10 s unless given). */
  readonly keepaliveMs?: number;
  /**
   * How long a ping may wait for its answer before the connection counts as half-open (gRPC's 20 s unless
   * given): a busy node (a fleet's agents starting on two cores) answers late, and is no lost connection.
   */
  readonly keepaliveTimeoutMs?: number;
  /** How long a connection may take to come up (a server that is blackholed never answers). */
  readonly connectTimeoutMs?: number;
}

/** The server ended the stream with a gRPC status, or the connection failed (UNAVAILABLE); `code` tells why. */
export class ConnectionError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

/** What the one who took the call over hears. */
export interface CallListener {
  message(bytes: Buffer): void;
  /** The server ended the call with status OK. */
  end(): void;
  failed(error: ConnectionError): void;
  /** The connection cannot take more for now (true), and can again (false). */
  full?(full: boolean): void;
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
    const problem = serverCertificateProblem(socket.getPeerCertificate(true), certificatesOf(security.ca), SERVER_CERT_NAME);
    if (problem) refused(`The server's certificate is refused: ${problem}.`);
  });
  return socket;
}

/**
 * The ConnectAgent call, opened at once: messages are written as they are given (HTTP/2 holds them until the
 * connection is up), and what the server sends is kept until a listener takes the call over.
 */
export class GrpcCall {
  private readonly session: http2.ClientHttp2Session;
  private readonly stream: http2.ClientHttp2Stream;
  /** The connection under the session (HTTP/2 lends out only a proxy of it that may not be destroyed). */
  private socket?: net.Socket;
  private listener?: CallListener;
  /** What happened before a listener came: messages, then maybe the end. */
  private readonly kept: Array<Buffer | ConnectionError | 'end'> = [];
  private over = false;
  private full = false;
  private status?: { code: number; message: string };
  private readonly timers: {
    connecting?: NodeJS.Timeout;
    pinging?: NodeJS.Timeout;
    unanswered?: NodeJS.Timeout;
    late?: NodeJS.Timeout;
    answerless?: NodeJS.Timeout;
    alive?: NodeJS.Timeout;
  } = {};

  constructor(readonly options: CallOptions) {
    const target = grpcTarget(options.serverUrl);
    const { session, readOn } = this.connect(target);
    this.session = session;
    this.stream = this.open(session, target, readOn);
    // An open call keeps the process alive, even while nothing else holds the loop.
    this.timers.alive = setInterval(() => undefined, 2 ** 30);
  }

  /** The HTTP/2 session to the server, up once it has spoken HTTP/2, kept alive by pings; `readOn` as told below. */
  private connect(target: string): { session: http2.ClientHttp2Session; readOn: () => void } {
    const options = this.options;
    const keepaliveMs = options.keepaliveMs ?? 10_000;
    const keepaliveTimeoutMs = options.keepaliveTimeoutMs ?? 20_000;
    const at = target.lastIndexOf(':');
    const [host, port] = [target.slice(0, at).replace(/^\[|\]$/g, ''), Number(target.slice(at + 1))];
    const security = options.security;
    let socket: net.Socket | undefined;
    const session = http2.connect(`http://${target}`, {
      createConnection: () => {
        socket = security.insecure ? net.connect({ host, port }) : tlsConnection(host, port, security, (problem) => session.destroy(new Error(problem)));
        this.socket = socket;
        return socket;
      },
    });
    /**
     * An answer nghttp2 cannot decode (a header field over 64 KiB, as a refusal of 100 000 characters is) makes it
     * end the session without a word to Node's side, which then stops reading: the server's close of the
     * connection stays unread until the keepalive gives up. Reading is started again when the call had no
     * answer a second after it opened, or a ping none a second after it was sent; a connection that is gone
     * then ends at once, and one that is only slow reads on as it would.
     */
    const readOn = () => (socket as { _handle?: { readStart?: () => number } } | undefined)?._handle?.readStart?.();
    session.on('error', (err: NodeJS.ErrnoException) =>
      this.fail(err.code === 'ECONNREFUSED' || err.code === 'ENOTFOUND' ? `${err.message} (${options.serverUrl})` : err.message),
    );
    const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    this.timers.connecting = setTimeout(
      () => this.fail(`the server did not answer within ${connectTimeoutMs / 1000} s (${options.serverUrl})`),
      connectTimeoutMs,
    );
    // Up once the server has spoken HTTP/2 (its settings): a socket that connects and stays silent is not a server.
    session.once('remoteSettings', () => {
      clearTimeout(this.timers.connecting);
      if (this.over) return;
      // Keepalive: a ping not answered within its timeout means the connection is half-open.
      this.timers.pinging = setInterval(() => {
        if (this.timers.unanswered !== undefined || session.destroyed || this.over) return;
        this.timers.unanswered = setTimeout(() => {
          this.fail('the server did not answer a keepalive ping: the connection is lost');
          session.destroy();
        }, keepaliveTimeoutMs);
        this.timers.late = setTimeout(readOn, 1000);
        session.ping(() => {
          clearTimeout(this.timers.unanswered);
          clearTimeout(this.timers.late);
          this.timers.unanswered = undefined;
        });
      }, keepaliveMs);
    });
    return { session, readOn };
  }

  /** The agent's one call on the session, its answers told as they come and its end as the server said it. */
  private open(session: http2.ClientHttp2Session, target: string, readOn: () => void): http2.ClientHttp2Stream {
    const security = this.options.security;
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
      this.status = { code: Number(headers['grpc-status']), message: decodeMessage(String(headers['grpc-message'] ?? '')) };
    };
    this.timers.answerless = setTimeout(readOn, 1000);
    let answered = false;
    stream.on('response', (headers) => {
      answered = true;
      clearTimeout(this.timers.answerless);
      const http = Number(headers[':status']);
      const type = String(headers['content-type'] ?? '');
      if (http !== 200) this.fail(`the server answered HTTP ${http}`, fromHttpStatus(http));
      // What follows is no gRPC (a web server's page): said as such, not read as messages.
      else if (!/^application\/grpc([+;]|$)/.test(type)) this.fail(`not a gRPC server: it answered ${type || 'without a content type'}`, Status.UNKNOWN);
      else takeStatus(headers);
    });
    stream.on('trailers', takeStatus);
    stream.on('data', (chunk: Buffer) => {
      if (this.over) return;
      try {
        for (const message of deframer.push(chunk)) this.tell(message);
      } catch (err) {
        this.fail((err as Error).message, err instanceof ConnectionError ? err.code : Status.INTERNAL);
        this.cancel();
      }
    });
    stream.on('error', (err: Error) => this.fail(err.message));
    // The server's side ended: its status (in the trailers, or in the headers of an answer without messages) says how.
    stream.on('end', () => {
      if (this.status?.code === Status.OK) this.tell('end');
      else if (this.status) this.fail(this.status.message || `the server ended the stream with status ${this.status.code}`, this.status.code);
      else if (answered) this.fail('the server ended the stream without a status');
      else this.fail('the connection ended before an answer the agent can read (nghttp2 refuses a header field over 64 KiB)');
    });
    stream.on('close', () => this.fail(session.destroyed ? 'the connection closed' : `the stream was reset by the server (code ${stream.rstCode})`));
    return stream;
  }

  /** Resolves once `bytes` (a message) went to the connection, or the call failed: never rejects. */
  write(message: Uint8Array): Promise<void> {
    if (this.over) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.stream.write(frame(message), () => resolve()) || this.full) return;
      // HTTP/2 holds what the server does not take yet: say so, and when it drained.
      this.full = true;
      this.listener?.full?.(true);
      this.stream.once('drain', () => {
        this.full = false;
        this.listener?.full?.(false);
      });
    });
  }

  /** Takes the call over: what was kept is told at once, then what comes. */
  listen(listener: CallListener): void {
    this.listener = listener;
    for (const event of this.kept.splice(0)) this.deliver(event);
  }

  /**
   * Ends the call as a crash would: the connection dropped, not a frame more. A released server takes only a
   * stream that fails for an agent gone (swdd~grpc-agent-connection-sends-agent-gone~1); Node's reset of a stream
   * half-closes it first (END_STREAM) and its session's close says GOAWAY without an error, and the server takes
   * either for an agent still there.
   */
  cancel(): void {
    this.over = true;
    for (const timer of Object.values(this.timers)) clearTimeout(timer);
    if (this.full) this.listener?.full?.(false);
    this.socket?.destroy();
    this.session.destroy();
  }

  private fail(message: string, code: number = Status.UNAVAILABLE): void {
    this.tell(new ConnectionError(message, code));
  }

  private tell(event: Buffer | ConnectionError | 'end'): void {
    if (this.over) return;
    if (!(event instanceof Buffer)) {
      this.over = true;
      for (const timer of Object.values(this.timers)) clearTimeout(timer);
    }
    if (this.listener) this.deliver(event);
    else this.kept.push(event);
  }

  private deliver(event: Buffer | ConnectionError | 'end'): void {
    if (event === 'end') this.listener!.end();
    else if (event instanceof ConnectionError) this.listener!.failed(event);
    else this.listener!.message(event);
  }
}

/**
 * A call opened with its hello before the agent's run was loaded (bin/start.ts), and that hello. Kept on the
 * process: the run is a bundle of its own (scripts/bundle.mjs), with its own copy of this module.
 */
interface Early {
  readonly call: Pick<GrpcCall, 'options' | 'write' | 'listen' | 'cancel'>;
  readonly hello: Uint8Array;
}
const EARLY = Symbol.for('ank-agent.early-call');
const slot = globalThis as { [EARLY]?: Early };

/** Opens the call and writes the hello now; resolves once it went to the connection (or the call failed). */
export function openEarly(options: CallOptions, hello: Uint8Array): Promise<void> {
  const call = new GrpcCall(options);
  slot[EARLY] = { call, hello };
  return call.write(hello);
}

/** The call opened early to this server, once: taken by the first connection, with the hello it sent. */
export function takeEarly(serverUrl: string): Early | undefined {
  const early = slot[EARLY];
  delete slot[EARLY];
  return early?.call.options.serverUrl === serverUrl ? early : undefined;
}
