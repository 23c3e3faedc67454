// A Control Interface client on the host, speaking length-delimited control_api like the Ankaios SDKs.
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Subject, filter, firstValueFrom, map, timeout } from 'rxjs';
import { type FromAnkaios, FromAnkaiosSchema, ToAnkaiosSchema } from '../../proto/gen/control_api_pb.js';
import { LINE_1 } from '../../lib/codec/lines.js';
import type { ProtocolLine } from '../../lib/version.js';
import { decodeFrames, encodeFrame } from '../../streams/length-delimited.js';

type ToAnkaiosInit = Parameters<typeof create<typeof ToAnkaiosSchema>>[1];

export class ControlInterfaceClient {
  readonly received: FromAnkaios[] = [];
  private readonly out: number;
  private input?: net.Socket;
  private readonly chunks = new Subject<Uint8Array>();
  private readonly arrivals = new Subject<FromAnkaios>();

  /** `line`: the protocol line the client speaks (it reads what the agent writes as that line). */
  constructor(
    private readonly folder: string,
    { read = true, line = LINE_1 as ProtocolLine } = {},
  ) {
    this.out = openSync(path.join(folder, 'output'), constants.O_WRONLY | constants.O_NONBLOCK);
    this.openInput();
    if (!read) this.input!.pause();
    this.chunks
      .pipe(
        decodeFrames(),
        filter((f) => f.kind === 'frame'),
        map((f) => fromBinary(FromAnkaiosSchema, line.read((f as { bytes: Uint8Array }).bytes))),
      )
      .subscribe((m) => {
        this.received.push(m);
        this.arrivals.next(m);
      });
  }

  static frame(message: ToAnkaiosInit): Uint8Array {
    return encodeFrame(toBinary(ToAnkaiosSchema, create(ToAnkaiosSchema, message)));
  }

  sendRaw(bytes: Uint8Array): void {
    writeSync(this.out, bytes);
  }

  send(message: ToAnkaiosInit): void {
    this.sendRaw(ControlInterfaceClient.frame(message));
  }

  hello(version = LINE_1.version): void {
    this.send({ ToAnkaiosEnum: { case: 'hello', value: { protocolVersion: version } } });
  }

  /** A CompleteStateRequest for the given field mask. */
  askState(requestId: string, ...fieldMask: string[]): void {
    this.send({ ToAnkaiosEnum: { case: 'request', value: { requestId, RequestContent: { case: 'completeStateRequest', value: { fieldMask } } } } });
  }

  /** The next message from the agent (or one already received and not yet taken). */
  private taken = 0;
  next(ms = 5000): Promise<FromAnkaios> {
    if (this.received.length > this.taken) return Promise.resolve(this.received[this.taken++]);
    return firstValueFrom(this.arrivals.pipe(timeout(ms))).then((m) => {
      this.taken++;
      return m;
    });
  }

  resume(): void {
    this.input?.resume();
  }

  /** Stops reading the input pipe for good: the agent finds no reader there. */
  closeInput(): void {
    this.input?.destroy();
    this.input = undefined;
  }

  /**
   * Opens the input pipe (again) and reads it. The released SDK keeps reading its descriptor after the
   * agent is gone (end of file) until a new agent writes; O_RDWR gives net.Socket the same: it never
   * sees the end of the file.
   */
  openInput(): void {
    const input = new net.Socket({ fd: openSync(path.join(this.folder, 'input'), constants.O_RDWR | constants.O_NONBLOCK), readable: true, writable: false });
    input.on('data', (b: Buffer) => this.chunks.next(b));
    this.input = input;
  }

  close(): void {
    this.closeInput();
    closeSync(this.out);
  }
}
