// The Control Interface pipes of the agent's workloads: their folders and FIFOs, opened for the life of
// the workload. What flows through them is the business of streams/control-interfaces.ts.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { BehaviorSubject, EMPTY, type Observable, Subject, type Subscription, defer, from, map, of, takeUntil } from 'rxjs';
import type { Logger } from '../logger.js';
import type { ControlInterfacePipe, WorkloadFrame } from '../ports.js';
import type { CreateOptions } from '../runtime-connector.js';
import { type ControlInterfaceAccess, type WorkloadSpec, needsControlInterface } from '../workload.js';
import { FifoWriter, fifoChunks, ensureFifo, openFifo } from './fifo.js';
import type { HostSide } from './host-side.js';
import { assertNoLinks, controlInterfaceFolder } from './run-folder.js';

/** What may wait in the agent for a workload's input pipe (beyond the 64 KiB of the pipe; one frame of any size may always wait). */
export const MAX_BACKLOG_BYTES = 1024 * 1024;

interface Instance {
  readonly folder: string;
  readonly access: ControlInterfaceAccess;
  readonly writer: FifoWriter<WorkloadFrame>;
  readonly closed$: Subject<void>;
}

export class ControlInterfacePipes implements HostSide {
  private readonly instances = new Map<string, Instance>();
  private readonly opened = new Subject<ControlInterfacePipe>();
  private readonly paused = new BehaviorSubject(false);
  private readonly undelivered = new Subject<WorkloadFrame>();
  /** Each workload's pipes as they are opened; their chunks end when they are closed. */
  readonly opened$: Observable<ControlInterfacePipe> = this.opened.asObservable();
  /** The frames whose reader was gone (streams/control-interfaces.ts cancels their log streams). */
  readonly undelivered$: Observable<WorkloadFrame> = this.undelivered.asObservable();

  /** Follows `paused$` (the server connection is full) until closeAll. */
  private readonly following: Subscription | undefined;

  constructor(
    private readonly ioFolder: string,
    private readonly log: Logger,
    paused$?: Observable<boolean>,
  ) {
    this.following = paused$?.subscribe((paused) => this.setPaused(paused));
  }

  /**
   * swdd~agent-create-control-interface-pipes-per-workload~2, swdd~agent-control-interface-creates-two-pipes-per-workload~1:
   * creates (or reuses) the FIFOs of a workload with allow rules and starts reading them.
   */
  prepare(spec: WorkloadSpec): Observable<CreateOptions> {
    if (!needsControlInterface(spec)) return of({});
    return defer(() => from(this.open(spec))).pipe(map((folder) => ({ controlInterfacePath: folder })));
  }

  /** Stops the workload's Control Interface (its folder goes with the workload's: host-side.ts). */
  release(spec: WorkloadSpec): Observable<never> {
    return defer(() => {
      const name = spec.instanceName.workloadName;
      const instance = this.instances.get(name);
      if (instance?.folder === controlInterfaceFolder(this.ioFolder, spec)) this.close(name, instance);
      return EMPTY;
    });
  }

  /**
   * swdd~agent-handles-control-interface-input-pipe-not-read~1: never blocks; a frame the workload does
   * not take in time is undelivered (fifo.ts says when).
   */
  write(frame: WorkloadFrame): void {
    this.instances.get(frame.workloadName)?.writer.write(frame);
  }

  /**
   * Backpressure: while the server connection cannot take more, no workload's output pipe is read (its
   * writes block, or fail with EAGAIN), so the agent's memory does not follow the request rate.
   */
  private setPaused(paused: boolean): void {
    if (paused !== this.paused.value) this.log.debug(`The Control Interfaces ${paused ? 'wait: the server connection is full' : 'are read again'}.`);
    this.paused.next(paused);
  }

  /** Closes every Control Interface (on shutdown); the folders stay for the workloads that keep running. */
  closeAll(): void {
    this.following?.unsubscribe();
    for (const [name, instance] of this.instances) this.close(name, instance);
  }

  private async open(spec: WorkloadSpec): Promise<string> {
    const name = spec.instanceName.workloadName;
    const folder = controlInterfaceFolder(this.ioFolder, spec);
    const current = this.instances.get(name);
    // swdd~agent-compares-control-interface-metadata~2: the same path and the same rules keep the open Control Interface.
    if (current?.folder === folder && isDeepStrictEqual(current.access, spec.controlInterfaceAccess)) return folder;
    if (current) this.close(name, current);
    mkdirSync(folder, { recursive: true });
    assertNoLinks(this.ioFolder, folder);
    await ensureFifo(path.join(folder, 'input'));
    await ensureFifo(path.join(folder, 'output'));
    // The output pipe is opened now, before anything can swap it; the input pipe each time a reader is
    // needed (openFifo: O_NOFOLLOW, only a FIFO).
    const output = openFifo(path.join(folder, 'output'));
    const writer = new FifoWriter<WorkloadFrame>(path.join(folder, 'input'), MAX_BACKLOG_BYTES, (frames, reason) => {
      this.log.info(`'${name}' is gone from its Control Interface (${reason}): ${frames.length} message(s) not delivered.`);
      frames.forEach((f) => this.undelivered.next(f));
    });
    const instance: Instance = { folder, access: spec.controlInterfaceAccess, writer, closed$: new Subject() };
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
