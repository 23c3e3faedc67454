// What a workload needs on the host before it is created (Control Interface, files), and its removal.
import { EMPTY, type Observable, concat, defer, forkJoin, map } from 'rxjs';
import type { CreateOptions } from '../runtime-connector.js';
import type { WorkloadSpec } from '../workload.js';
import { assertNoLinks, removeTree, workloadFolder } from './run-folder.js';

export interface HostSide {
  prepare(spec: WorkloadSpec): Observable<CreateOptions>;
  release(spec: WorkloadSpec): Observable<never>;
  /** What a create that failed must not leave behind (the workload's files); the rest stays for the retry. */
  discard?(spec: WorkloadSpec): Observable<never>;
}

/**
 * All parts prepared together, their options merged; released in turn, then the workload's folder
 * `<io folder>/<workload>.<id>/` goes, whoever made it (swdd~agent-delete-old-workload~3,
 * swdd~agent-workload-control-loop-executes-delete~3).
 */
export function hostSide(ioFolder: string, ...parts: HostSide[]): Required<HostSide> {
  return {
    prepare: (spec) =>
      forkJoin(parts.map((p) => p.prepare(spec))).pipe(
        map((options) => {
          const merged: CreateOptions = Object.assign({}, ...options);
          // Checked last, right before the runtime mounts them: Podman follows links.
          const sources = [merged.controlInterfacePath, ...(merged.fileMounts ?? []).map((m) => m.hostPath)];
          for (const source of sources) if (source !== undefined) assertNoLinks(ioFolder, source);
          return merged;
        }),
      ),
    discard: (spec) => concat(...parts.map((p) => p.discard?.(spec) ?? EMPTY)),
    release: (spec) =>
      concat(
        ...parts.map((p) => p.release(spec)),
        defer(() => {
          removeTree(workloadFolder(ioFolder, spec.instanceName));
          return EMPTY;
        }),
      ),
  };
}
