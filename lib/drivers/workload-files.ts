// Workload files: written under `<run folder>/<agent>_io/<workload>.<id>/files/<mount point>` before the
// workload is created, bind-mounted read-only at their mount points, removed with the workload.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { EMPTY, type Observable, defer, of } from 'rxjs';
import { ConfigurationError, type CreateOptions } from '../runtime-connector.js';
import type { WorkloadFile, WorkloadSpec } from '../workload.js';
import type { HostSide } from './host-side.js';
import { filesFolder, removeTree } from './run-folder.js';

export { filesFolder };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Why a mount point cannot be used, or undefined when it can. */
export function mountPointProblem(mountPoint: string): string | undefined {
  if (!mountPoint.startsWith('/')) return 'it is not absolute';
  if (mountPoint.endsWith('/')) return 'it ends with /';
  if (
    mountPoint
      .split('/')
      .slice(1)
      .some((part) => part === '' || part === '.' || part === '..')
  )
    return "it has empty, '.' or '..' parts";
  return undefined;
}

function contentOf(file: WorkloadFile): Buffer {
  if (file.binaryData === undefined) return Buffer.from(file.data ?? '');
  const compact = file.binaryData.replace(/\s+/g, '');
  if (!BASE64.test(compact) || compact.length % 4 !== 0) throw new ConfigurationError(`The binaryData of the file '${file.mountPoint}' is not base64.`);
  return Buffer.from(compact, 'base64');
}

export class WorkloadFiles implements HostSide {
  constructor(private readonly ioFolder: string) {}

  /** Writes the files; a file that cannot be used fails the create without retries (ConfigurationError). */
  prepare(spec: WorkloadSpec): Observable<CreateOptions> {
    if (spec.files.length === 0) return of({});
    return defer(() => {
      const root = filesFolder(this.ioFolder, spec);
      const fileMounts = spec.files.map((file) => {
        const problem = mountPointProblem(file.mountPoint);
        if (problem) throw new ConfigurationError(`The mount point '${file.mountPoint}' of a file cannot be used: ${problem}.`);
        return { hostPath: path.join(root, file.mountPoint), content: contentOf(file), mountPoint: file.mountPoint };
      });
      removeTree(root);
      for (const f of fileMounts) {
        try {
          mkdirSync(path.dirname(f.hostPath), { recursive: true });
          writeFileSync(f.hostPath, f.content, { mode: 0o644 });
        } catch (err) {
          // Two files whose mount points need one path as a file and as a folder never fit: no retry helps.
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR')
            throw new ConfigurationError(`The file '${f.mountPoint}' cannot be written: another file of the workload is mounted on its path (${code}).`);
          throw err;
        }
      }
      return of({ fileMounts: fileMounts.map(({ hostPath, mountPoint }) => ({ hostPath, mountPoint })) });
    });
  }

  /** The files go with the workload's folder (host-side.ts). */
  release(): Observable<never> {
    return EMPTY;
  }

  /** swdd~agent-workload-control-loop-handles-failed-workload-creation~1: a create that failed leaves no files. */
  discard(spec: WorkloadSpec): Observable<never> {
    return defer(() => {
      removeTree(filesFolder(this.ioFolder, spec));
      return EMPTY;
    });
  }
}
