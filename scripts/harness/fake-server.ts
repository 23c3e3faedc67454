// A fake Ankaios server for the specs: a real @grpc/grpc-js server on a loopback port, speaking the
// Ankaios wire format through the same generated types as the agent.
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { type FromServer, FromServerSchema, type ToServer, ToServerSchema } from '../../proto/gen/grpc_api_pb.js';
import { LINE_1 } from '../../lib/codec/lines.js';
import { compatibleVersions } from '../../lib/version.js';

type Init = Parameters<typeof create<typeof FromServerSchema>>[1];

/** One ConnectAgent stream as the server sees it. */
export class AgentStream {
  readonly received: ToServer[] = [];
  readonly events = new EventEmitter();
  ended = false;
  /** How the agent ended the stream: a half-close, or a failure (cancelled, reset) that a v1.x server takes as "agent gone". */
  endedBy?: 'half-close' | 'failure';

  constructor(private readonly call: grpc.ServerDuplexStream<ToServer, FromServer>) {
    call.on('data', (m: ToServer) => {
      this.received.push(m);
      this.events.emit('message', m);
    });
    const ended = (by: 'half-close' | 'failure') => {
      if (this.ended) return;
      this.ended = true;
      this.endedBy = by;
      this.events.emit('end');
    };
    // grpc-js tells a cancel as 'end' first and 'cancelled' right after: a half-close is an 'end' that no cancel follows.
    call.on('end', () => {
      setTimeout(() => ended(call.cancelled ? 'failure' : 'half-close'), 20);
      call.end();
    });
    call.on('cancelled', () => ended('failure'));
    call.on('error', () => ended('failure'));
  }

  send(message: Init): void {
    this.call.write(create(FromServerSchema, message));
  }

  /** A slow server: stops reading the agent's messages (HTTP/2 flow control then holds the agent back). */
  stall(): void {
    this.call.pause();
  }

  /** Reads the agent's messages again after `stall`. */
  resume(): void {
    this.call.resume();
  }

  /** Ends the stream with a gRPC status (OK ends it normally). */
  close(code: grpc.status = grpc.status.OK, details = ''): void {
    if (code === grpc.status.OK) this.call.end();
    else this.call.emit('error', { code, details });
  }

  /** Resolves with the first message (already received or coming) that matches. */
  waitFor(match: (m: ToServer) => boolean, timeoutMs = 10_000): Promise<ToServer> {
    const found = this.received.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.events.off('message', listener);
        reject(new Error(`no matching message within ${timeoutMs} ms; received: ${this.received.map((m) => m.ToServerEnum.case).join(', ')}`));
      }, timeoutMs);
      const listener = (m: ToServer) => {
        if (!match(m)) return;
        clearTimeout(timer);
        this.events.off('message', listener);
        resolve(m);
      };
      this.events.on('message', listener);
    });
  }

  waitForEnd(timeoutMs = 10_000): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the stream did not end')), timeoutMs);
      this.events.once('end', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

export interface ServerTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** A server's protocol line: what it accepts in the AgentHello, how it writes its messages. */
export interface ServerLine {
  readonly name: string;
  readonly version: string;
  readonly write: (bytes: Uint8Array) => Uint8Array;
}

/** A server of a major the agent does not speak. */
export const LINE_2: ServerLine = { name: '2', version: '2.0.0', write: (b) => b };

export class FakeAnkaiosServer {
  readonly streams: AgentStream[] = [];
  /** The AgentHellos it refused, as `[sent version, refusal]`. */
  readonly refused: Array<[string, string]> = [];
  private readonly events = new EventEmitter();
  private server?: grpc.Server;

  private constructor(
    public port: number,
    private readonly tls: ServerTls | undefined,
    readonly line: ServerLine,
    private readonly greet: boolean,
  ) {}

  /**
   * A server of `line` (the 1.x line by default), refusing agents of other lines as released servers do;
   * with `greet`, it answers an accepted hello with an empty ServerHello at once, as a real server does.
   */
  static async start(options: { port?: number; tls?: ServerTls; line?: ServerLine; greet?: boolean } = {}): Promise<FakeAnkaiosServer> {
    const server = new FakeAnkaiosServer(options.port ?? 0, options.tls, options.line ?? LINE_1, options.greet ?? false);
    await server.listen();
    return server;
  }

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** Starts (again) on the same port. */
  async listen(): Promise<void> {
    const server = new grpc.Server();
    server.addService(
      {
        ConnectAgent: {
          path: '/grpc_api.AgentConnection/ConnectAgent',
          requestStream: true,
          responseStream: true,
          requestSerialize: (m: ToServer) => Buffer.from(toBinary(ToServerSchema, m)),
          requestDeserialize: (b: Buffer) => fromBinary(ToServerSchema, b),
          responseSerialize: (m: FromServer) => Buffer.from(this.line.write(toBinary(FromServerSchema, m))),
          responseDeserialize: (b: Buffer) => fromBinary(FromServerSchema, b),
        },
      },
      {
        ConnectAgent: (call: grpc.ServerDuplexStream<ToServer, FromServer>) => {
          // Like a released server: an incompatible AgentHello fails the call before anything is sent.
          call.once('data', (first: ToServer) => {
            const sent = first.ToServerEnum.case === 'agentHello' ? first.ToServerEnum.value.protocolVersion : '';
            if (compatibleVersions(this.line.version, sent)) {
              if (this.greet) stream.send({ FromServerEnum: { case: 'serverHello', value: {} } });
              return;
            }
            const refusal = `Unsupported protocol version '${sent}'. Currently supported '${this.line.name}'`;
            this.refused.push([sent, refusal]);
            call.emit('error', { code: grpc.status.FAILED_PRECONDITION, details: refusal });
          });
          const stream = new AgentStream(call);
          this.streams.push(stream);
          this.events.emit('stream', stream);
        },
      },
    );
    const credentials = this.tls
      ? grpc.ServerCredentials.createSsl(this.tls.ca, [{ cert_chain: this.tls.cert, private_key: this.tls.key }], true)
      : grpc.ServerCredentials.createInsecure();
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${this.port}`, credentials, (err, port) => (err ? reject(err) : resolve(port))),
    );
    this.server = server;
  }

  /** The agent stream number `index` (from 0), once it is open. */
  nextStream(timeoutMs = 10_000, index = 0): Promise<AgentStream> {
    if (this.streams.length > index) return Promise.resolve(this.streams[index]);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.events.off('stream', opened);
        reject(new Error(`no agent stream number ${index} within ${timeoutMs} ms`));
      }, timeoutMs);
      const opened = () => {
        if (this.streams.length <= index) return;
        clearTimeout(timer);
        this.events.off('stream', opened);
        resolve(this.streams[index]);
      };
      this.events.on('stream', opened);
    });
  }

  /** Drops every connection at once, as a crashing server would. */
  stop(): void {
    this.server?.forceShutdown();
    this.server = undefined;
  }
}

// ---- helpers to speak about workloads on the wire ----------------------------------------------

import { addedWorkloadTo, executionStateFrom } from '../../lib/codec/wire.js';
import { formatState } from '../../lib/execution-state.js';

/** An AddedWorkload as the server sends it. */
export const addedWorkload = addedWorkloadTo;

/** Every workload state the agent sent on the stream, as `[workloadName, id, "State(Sub): info"]`. */
export function reportedStates(stream: AgentStream): Array<[string, string, string]> {
  return stream.received.flatMap((m) =>
    (m.ToServerEnum.case === 'updateWorkloadState' ? m.ToServerEnum.value.workloadStates : []).map((s) => {
      const state = executionStateFrom(s.executionState);
      return [s.instanceName?.workloadName ?? '', s.instanceName?.id ?? '', state ? formatState(state) : '?'] as [string, string, string];
    }),
  );
}
