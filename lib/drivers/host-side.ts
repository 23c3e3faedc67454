// What a workload needs on the host before it is created (Control Interface, files), and its removal.
import { Observable, concat, forkJoin, map } from 'rxjs';
import type { CreateOptions } from '../runtime-connector.js';
import type { WorkloadSpec } from '../workload.js';

export interface HostSide {
  prepare(spec: WorkloadSpec): Observable<CreateOptions>;
  release(spec: WorkloadSpec): Observable<never>;
}

/** All parts prepared together, their options merged; released in turn. */
export function hostSide(...parts: HostSide[]): HostSide {
  return {
    prepare: (spec) => forkJoin(parts.map((p) => p.prepare(spec))).pipe(map((options) => Object.assign({}, ...options) as CreateOptions)),
    release: (spec) => concat(...parts.map((p) => p.release(spec))),
  };
}
