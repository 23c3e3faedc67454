// The places of a workload under the agent's folder `<run folder>/<agent>_io/`.
import { chmodSync, existsSync, lstatSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';
import { type WorkloadInstanceName, instanceNameProblem } from '../workload.js';

/**
 * `<run folder>/<agent>_io/<workload>.<id>/`: everything the agent keeps on the host for one workload
 * instance. A name that could lead anywhere else is refused here too, whatever let it through.
 */
export function workloadFolder(ioFolder: string, n: WorkloadInstanceName): string {
  const problem = instanceNameProblem(n);
  if (problem) throw new Error(problem);
  return path.join(ioFolder, `${n.workloadName}.${n.id}`);
}

/** swdd~agent-control-interface-pipes-path-naming~2: `<workload folder>/control_interface/` */
export const controlInterfaceFolder = (ioFolder: string, spec: { readonly instanceName: WorkloadInstanceName }): string =>
  path.join(workloadFolder(ioFolder, spec.instanceName), 'control_interface');

/** `<workload folder>/files/`, where the workload's files are written before they are mounted. */
export const filesFolder = (ioFolder: string, spec: { readonly instanceName: WorkloadInstanceName }): string =>
  path.join(workloadFolder(ioFolder, spec.instanceName), 'files');

/** The default run folder is shared by the agents of all users: everyone may write, only owners remove (as /tmp). */
export const SHARED_RUN_FOLDER_MODE = 0o1777;

/**
 * swdd~agent-prepares-dedicated-run-folder~2: makes sure `<run folder>/<agent>_io/` is there and is the
 * agent's own: both real directories (no symlinks), the io folder of the agent's user. The default run
 * folder is created when missing, with full permissions (and the sticky bit, so no other user can move
 * an agent's io folder away), and may belong to another user; a custom one must exist and be the agent's.
 * Returns the io folder; throws ConfigError naming what is wrong.
 */
export function prepareRunFolder(runFolder: string, agentName: string, isDefault: boolean): string {
  const ioFolder = path.join(runFolder, `${agentName}_io`);
  const check = (folder: string, shared = false) => {
    const stat = lstatSync(folder);
    if (stat.isSymbolicLink()) throw new ConfigError(`The run folder '${folder}' is a symbolic link: the agent works only in a real folder of its own.`);
    if (!stat.isDirectory()) throw new ConfigError(`The run folder '${folder}' is not a folder.`);
    if (!shared && stat.uid !== process.getuid?.()) throw new ConfigError(`The run folder '${folder}' belongs to another user (uid ${stat.uid}).`);
  };
  try {
    if (!existsSync(runFolder)) {
      if (!isDefault) throw new ConfigError(`The run folder '${runFolder}' does not exist: create it, or leave -r out for the default.`);
      mkdirSync(runFolder, { recursive: true });
      // Not left to the umask: the folder must be usable by agents of other users.
      chmodSync(runFolder, SHARED_RUN_FOLDER_MODE);
    }
    check(runFolder, isDefault);
    if (!existsSync(ioFolder)) mkdirSync(ioFolder, { mode: 0o755 });
    check(ioFolder);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`Cannot prepare the run folder '${ioFolder}': ${(err as Error).message}`);
  }
  return ioFolder;
}
