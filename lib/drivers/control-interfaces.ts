// The Control Interfaces of the agent's workloads: their FIFOs, sessions and the routing of
// responses back by the workload name in front of the request id.
import { mkdirSync, rmSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { EMPTY, Observable, Subject, Subscription, defer, from, map, of } from 'rxjs';
import { RequestSchema } from '../../proto/gen/ank_base_pb.js';
import { CONTROL_API_FRAMES, FromAnkaiosMessage, type Request, type Response, encodeFromAnkaios } from '../control-api.js';
import type { Logger } from '../logger.js';
import type { CreateOptions } from '../runtime-connector.js';
import { type WorkloadSpec, needsControlInterface } from '../workload.js';
import { controlSession } from '../../streams/control-interface-session.js';
import { decodeFrames, encodeFrame } from '../../streams/length-delimited.js';
import { FifoWriter, fifoChunks, makeFifo } from './fifo.js';

/** What a workload that never reads its input pipe may have waiting in the agent (beyond the 64 KiB of the pipe). */
export const MAX_BACKLOG_BYTES = 64 * 1024;

interface Instance {
  readonly folder: string;
  readonly writer: FifoWriter;
  readonly session: Subscription;
  dropped: number;
}

/** swdd~agent-control-interface-pipes-path-naming~1: `<run folder>/<agent>_io/<workload>.<id>/control_interface/` */
export const controlInterfaceFolder = (ioFolder: string, spec: WorkloadSpec) =>
  path.join(ioFolder, `${spec.instanceName.workloadName}.${spec.instanceName.id}`, 'control_interface');

export class ControlInterfaces {
  private readonly instances = new Map<string, Instance>();
  private readonly requests = new Subject<Request>();
  /** Allowed requests of all workloads, with their workload name in front of the request id. */
  readonly requests$: Observable<Request> = this.requests.asObservable();

  constructor(private readonly ioFolder: string, private readonly log: Logger) {}

  /**
   * swdd~agent-create-control-interface-pipes-per-workload~1, swdd~agent-control-interface-creates-two-pipes-per-workload~1:
   * creates (or reuses) the FIFOs of a workload with allow rules and starts reading them.
   */
  prepare(spec: WorkloadSpec): Observable<CreateOptions> {
    if (!needsControlInterface(spec)) return of({});
    return defer(() => from(this.open(spec))).pipe(map((folder) => ({ controlInterfacePath: folder })));
  }

  /** Stops the workload's Control Interface and removes its folder. */
  release(spec: WorkloadSpec): Observable<never> {
    return defer(() => {
      const name = spec.instanceName.workloadName;
      const instance = this.instances.get(name);
      if (instance && instance.folder === controlInterfaceFolder(this.ioFolder, spec)) {
        this.close(name, instance);
        rmSync(instance.folder, { recursive: true, force: true });
        try {
          rmdirSync(path.dirname(instance.folder));
        } catch {
          // other things of the workload (its files) are still there
        }
      }
      return EMPTY;
    });
  }

  /**
   * swdd~agent-forward-responses-to-control-interface-pipe~1, swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1,
   * swdd~agent-remove-id-prefix-forwarding-control-interface-response~1: a response from the server goes to
   * the workload named before the `@` of its request id, without that prefix.
   */
  deliver(response: Response): void {
    const at = response.requestId.indexOf('@');
    const name = at < 0 ? '' : response.requestId.slice(0, at);
    const instance = this.instances.get(name);
    if (!instance) {
      this.log.debug(`Dropped a response for '${response.requestId}': no such workload with a Control Interface.`);
      // A log stream nobody reads any more is cancelled at the server.
      if (response.ResponseContent.case === 'logEntriesResponse') {
        this.requests.next(create(RequestSchema, { requestId: response.requestId, RequestContent: { case: 'logsCancelRequest', value: {} } }));
      }
      return;
    }
    this.send(name, instance, FromAnkaiosMessage.response({ ...response, requestId: response.requestId.slice(at + 1) }));
  }

  /** Closes every Control Interface (on shutdown); the folders stay for the workloads that keep running. */
  closeAll(): void {
    for (const [name, instance] of this.instances) this.close(name, instance);
  }

  private async open(spec: WorkloadSpec): Promise<string> {
    const name = spec.instanceName.workloadName;
    const folder = controlInterfaceFolder(this.ioFolder, spec);
    const current = this.instances.get(name);
    if (current?.folder === folder) return folder;
    if (current) this.close(name, current);
    mkdirSync(folder, { recursive: true });
    await makeFifo(path.join(folder, 'input'));
    await makeFifo(path.join(folder, 'output'));
    // swdd~agent-ensures-control-interface-output-pipe-read~1: the output pipe is read for the workload's whole life.
    const writer = new FifoWriter(path.join(folder, 'input'), MAX_BACKLOG_BYTES);
    const instance: Instance = { folder, writer, session: new Subscription(), dropped: 0 };
    instance.session.add(controlSession(name, spec.controlInterfaceAccess, fifoChunks(path.join(folder, 'output')).pipe(decodeFrames(CONTROL_API_FRAMES))).subscribe({
      next: (out) => {
        if (out.kind === 'toServer') this.requests.next(out.request);
        else if (out.kind === 'toWorkload') this.send(name, instance, out.message);
        else this.log[out.level](out.text);
      },
      error: (err: unknown) => this.log.warn(`The Control Interface of '${name}' stopped reading: ${String(err)}`),
    }));
    this.instances.set(name, instance);
    return folder;
  }

  /** swdd~agent-handles-control-interface-input-pipe-not-read~1: never blocks; a full backlog drops the message. */
  private send(name: string, instance: Instance, message: Parameters<typeof encodeFromAnkaios>[0]): void {
    if (instance.writer.write(encodeFrame(encodeFromAnkaios(message)))) {
      if (instance.dropped > 0) this.log.warn(`'${name}' reads its Control Interface again; ${instance.dropped} message(s) were dropped.`);
      instance.dropped = 0;
    } else if (instance.dropped++ === 0) {
      this.log.warn(`'${name}' does not read its Control Interface input: dropping messages until it does.`);
    }
  }

  private close(name: string, instance: Instance): void {
    instance.session.unsubscribe();
    instance.writer.close();
    this.instances.delete(name);
  }
}
