// The Control Interfaces wired as the agent wires them (the pipes driver and the pipelines over it),
// with the requests for the server coming out and the server's responses going in.
import { type Observable, Subject, of } from 'rxjs';
import { PROTOCOL_LINES } from '../../lib/codec/lines.js';
import type { ProtocolLine } from '../../lib/version.js';
import type { Request, Response } from '../../lib/codec/control-api.js';
import { ControlInterfacePipes } from '../../lib/drivers/control-interface-pipes.js';
import { hostSide } from '../../lib/drivers/host-side.js';
import type { Logger } from '../../lib/logger.js';
import type { CreateOptions } from '../../lib/runtime-connector.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { controlInterfaces } from '../../streams/control-interfaces.js';

export class ControlInterfaceHub {
  private readonly pipes: ControlInterfacePipes;
  private readonly responses = new Subject<Response>();
  private readonly requests = new Subject<Request>();
  /** Allowed requests of all workloads, with their workload name in front of the request id. */
  readonly requests$: Observable<Request> = this.requests.asObservable();

  /** `lines`: the protocol lines the workloads may speak (those of the server). */
  constructor(
    private readonly ioFolder: string,
    log: Logger,
    lines: readonly ProtocolLine[] = PROTOCOL_LINES,
  ) {
    this.pipes = new ControlInterfacePipes(ioFolder, log);
    controlInterfaces({
      pipes$: this.pipes.opened$,
      responses$: this.responses,
      connection$: of({ online: true, lines }),
      undelivered$: this.pipes.undelivered$,
    }).subscribe((out) => {
      if (out.kind === 'toServer') this.requests.next(out.request);
      else if (out.kind === 'toWorkload') this.pipes.write(out.frame);
      else if (out.kind === 'log') log[out.level](out.text);
    });
  }

  prepare(spec: WorkloadSpec): Observable<CreateOptions> {
    return this.pipes.prepare(spec);
  }

  /** Releases the workload's host side as the agent does: its Control Interface, then its folder. */
  release(spec: WorkloadSpec): Observable<never> {
    return hostSide(this.ioFolder, this.pipes).release(spec);
  }

  /** A response from the server. */
  deliver(response: Response): void {
    this.responses.next(response);
  }

  closeAll(): void {
    this.pipes.closeAll();
  }
}
