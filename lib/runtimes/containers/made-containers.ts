// What a container runtime's creates tell its cache: `run --detach` returns once the container it made runs.
import { type Observable, type TimestampProvider, defer, tap } from 'rxjs';
import type { ContainerEvent } from '../../ports.js';

/**
 * swdd~podman-state-getter-reset-cache~1, swdd~containerd-state-getter-reset-cache~1: the start each create made,
 * kept until the new workload's state checker takes it (or the container goes). The cache hears it as the agent's
 * own word, which puts the new container in its picture without a poll (a burst of creates asked one each).
 */
export class MadeContainers {
  private readonly starts = new Map<string, ContainerEvent>();

  constructor(private readonly clock: TimestampProvider) {}

  /** `run$`, a `run --detach` that emits the id of the container it made, named `name`, with the instance's labels. */
  recorded(run$: Observable<string>, name: string, instance: string, agentName: string): Observable<string> {
    return defer(() => {
      // An exit told after this is of the new run, which may have ended before `run` returned.
      const at = this.clock.now();
      return run$.pipe(
        tap((id) => this.starts.set(id, { id, change: 'started', at, own: true, container: { names: [name], labels: { name: instance, agent: agentName } } })),
      );
    });
  }

  /** The start of container `id` its create made, once: for its state checker. */
  take(id: string): ContainerEvent | undefined {
    const start = this.starts.get(id);
    this.starts.delete(id);
    return start;
  }
}
