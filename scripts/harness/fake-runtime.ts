// An in-memory runtime for the tests of pure stream logic (never for integration tests).
import { EMPTY, NEVER, type Observable, defer, of } from 'rxjs';
import type { ExecutionState } from '../../lib/execution-state.js';
import type { ExistingWorkload, RuntimeConnector } from '../../lib/runtime-connector.js';
import type { WorkloadInstanceName, WorkloadSpec } from '../../lib/workload.js';

export interface FakeBehaviour {
  existing?: () => Observable<readonly ExistingWorkload[]>;
  /** `attempt` counts the creates of this workload name, from 1. */
  create?: (spec: WorkloadSpec, attempt: number) => Observable<string>;
  delete?: (id: string) => Observable<void>;
  states?: (id: string) => Observable<ExecutionState>;
  workloadId?: (name: WorkloadInstanceName) => Observable<string | undefined>;
  logs?: (id: string) => Observable<string>;
  /** Given: the runtime can start an exited workload again in place. */
  startAgain?: (id: string) => Observable<void>;
  /** Given: the runtime can stop a workload and keep it (it has health checks). */
  stop?: (id: string) => Observable<void>;
  /**
   * Given: the runtime has an image fetched ahead, the one of the config's `image:` line (`attempt` counts the
   * fetches, from 1).
   */
  fetchImage?: (spec: WorkloadSpec, attempt: number) => Observable<string>;
}

export class FakeRuntime implements RuntimeConnector {
  /** What the core asked for, in order: `create <instance>`, `delete <id>`, `list`, `id <instance>`, `watch <id>`. */
  readonly calls: string[] = [];
  private readonly attempts = new Map<string, number>();

  readonly startAgain?: (id: string) => Observable<void>;
  readonly stop?: (id: string) => Observable<void>;
  readonly imagesToFetch?: (spec: WorkloadSpec) => readonly string[];
  readonly fetchImages?: (spec: WorkloadSpec, images: readonly string[]) => Observable<string>;

  constructor(
    private readonly behaviour: FakeBehaviour = {},
    readonly name = 'fake',
  ) {
    const { startAgain, fetchImage, stop } = behaviour;
    if (stop) {
      this.stop = (id) =>
        defer(() => {
          this.calls.push(`stop ${id}`);
          return stop(id);
        });
    }
    if (fetchImage) {
      let fetches = 0;
      this.imagesToFetch = (spec) => [/image: *(\S+)/.exec(spec.runtimeConfig)?.[1] ?? 'image'];
      this.fetchImages = (spec, images) =>
        defer(() => {
          this.calls.push(`fetch ${spec.instanceName.workloadName} ${images.join(' ')}`);
          return fetchImage(spec, ++fetches);
        });
    }
    if (startAgain) {
      this.startAgain = (id) =>
        defer(() => {
          this.calls.push(`start ${id}`);
          return startAgain(id);
        });
    }
  }

  listReusableWorkloads(): Observable<readonly ExistingWorkload[]> {
    return defer(() => {
      this.calls.push('list');
      return this.behaviour.existing?.() ?? of([]);
    });
  }

  createWorkload(spec: WorkloadSpec): Observable<string> {
    return defer(() => {
      const key = spec.instanceName.workloadName;
      const attempt = (this.attempts.get(key) ?? 0) + 1;
      this.attempts.set(key, attempt);
      this.calls.push(`create ${spec.instanceName.workloadName}`);
      return this.behaviour.create?.(spec, attempt) ?? of(`id-${spec.instanceName.workloadName}-${attempt}`);
    });
  }

  getWorkloadId(name: WorkloadInstanceName): Observable<string | undefined> {
    return defer(() => {
      this.calls.push(`id ${name.workloadName}`);
      return this.behaviour.workloadId?.(name) ?? of(`id-${name.workloadName}-existing`);
    });
  }

  checkState(id: string): Observable<ExecutionState> {
    return defer(() => {
      this.calls.push(`watch ${id}`);
      return this.behaviour.states?.(id) ?? NEVER;
    });
  }

  logs(id: string): Observable<string> {
    return defer(() => {
      this.calls.push(`logs ${id}`);
      return this.behaviour.logs?.(id) ?? EMPTY;
    });
  }

  deleteWorkload(id: string): Observable<void> {
    return defer(() => {
      this.calls.push(`delete ${id}`);
      return this.behaviour.delete?.(id) ?? EMPTY;
    });
  }
}
