// The Control Interface pipes of the agent's workloads: their folders and FIFOs, opened for the life of
// the workload. What flows through them is the business of streams/control-interfaces.ts.
import { mkdirSync, rmSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { BehaviorSubject, EMPTY, Observable, Subject, defer, from, map, of, takeUntil } from 'rxjs';
import type { Logger } from '../logger.js';
import type { ControlInterfacePipe, WorkloadFrame } from '../ports.js';
import type { CreateOptions } from '../runtime-connector.js';
import { type WorkloadSpec, needsControlInterface } from '../workload.js';
import { FifoWriter, fifoChunks, ensureFifo, openFifo } from './fifo.js';
import type { HostSide } from './host-side.js';
import { controlInterfaceFolder } from './run-folder.js';

/** What a workload that never reads its input pipe may have waiting in the agent (beyond the 64 KiB of the pipe). */
export const MAX_BACKLOG_BYTES = 64 * 1024;

interface Instance {
  readonly folder: string;
  readonly writer: FifoWriter;
  readonly closed$: Subject<void>;
  dropped: number;
}

export class ControlInterfacePipes implements HostSide {
  private readonly instances = new Map<string, Instance>();
  private readonly opened = new Subject<ControlInterfacePipe>();
  private readonly paused = new BehaviorSubject(false);
  /** Each workload's pipes as they are opened; their chunks end when they are closed. */
  readonly opened$: Observable<ControlInterfacePipe> = this.opened.asObservable();

  constructor(private readonly ioFolder: string, private readonly log: Logger) {}

  /**
   * swdd~agent-create-control-interface-pipes-per-workload~2, swdd~agent-control-interface-creates-two-pipes-per-workload~1:
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

  /** swdd~agent-handles-control-interface-input-pipe-not-read~1: never blocks; a full backlog drops the frame. */
  write({ workloadName, bytes }: WorkloadFrame): void {
    const instance = this.instances.get(workloadName);
    if (!instance) return;
    if (instance.writer.write(bytes)) {
      if (instance.dropped > 0) this.log.warn(`'${workloadName}' reads its Control Interface again; ${instance.dropped} message(s) were dropped.`);
      instance.dropped = 0;
    } else if (instance.dropped++ === 0) {
      this.log.warn(`'${workloadName}' does not read its Control Interface input: dropping messages until it does.`);
    }
  }

  /**
   * Backpressure: while the server connection cannot take more, no workload's output pipe is read (its
   * writes block, or fail with EAGAIN), so the agent's memory does not follow the request rate.
   */
  setPaused(paused: boolean): void {
    if (paused !== this.paused.value) this.log.debug(`The Control Interfaces ${paused ? 'wait: the server connection is full' : 'are read again'}.`);
    this.paused.next(paused);
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
    await ensureFifo(path.join(folder, 'input'));
    await ensureFifo(path.join(folder, 'output'));
    // Both ends are opened now, before anything can swap them (O_NOFOLLOW, checked to be FIFOs).
    const writer = new FifoWriter(path.join(folder, 'input'), MAX_BACKLOG_BYTES);
    let output: number;
    try {
      output = openFifo(path.join(folder, 'output'));
    } catch (err) {
      writer.close();
      throw err;
    }
    const instance: Instance = { folder, writer, closed$: new Subject(), dropped: 0 };
    this.instances.set(name, instance);
    // swdd~agent-ensures-control-interface-output-pipe-read~1: the output pipe is read for the workload's whole life.
    this.opened.next({
      workloadName: name,
      access: spec.controlInterfaceAccess,
      chunks$: fifoChunks(output, this.paused).pipe(takeUntil(instance.closed$)),
    });
    return folder;
  }

  private close(name: string, instance: Instance): void {
    instance.closed$.next();
    instance.writer.close();
    this.instances.delete(name);
  }
}
