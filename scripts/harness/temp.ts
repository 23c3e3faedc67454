// Temporary folders of the specs and benchmarks: made in the system's temporary folder and removed when the test
// process exits, whatever the spec that made one did with it (a run folder, a fake CLI, a socket's place).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const made: string[] = [];

/** A new folder whose name starts with `prefix`, removed at the exit of the test process. */
export function specFolder(prefix: string): string {
  const folder = mkdtempSync(path.join(os.tmpdir(), prefix));
  if (made.length === 0) process.once('exit', () => made.forEach(removeQuietly));
  made.push(folder);
  return folder;
}

/** A folder still mounted on (a spec's tmpfs) or in use is left as it is: never a failure at the exit. */
function removeQuietly(folder: string): void {
  try {
    rmSync(folder, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    // Left.
  }
}
