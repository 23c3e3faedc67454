// The places of a workload under the agent's folder `<run folder>/<agent>_io/`.
import { type Stats, closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync, realpathSync, rmSync } from 'node:fs';
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
 * Removes a path and all under it, never following a link; nothing when it is not there. Looked for first: most
 * workloads have no folder of their own, and rmSync's own look throws inside for a path that is not there, an
 * exception that costs more than the look (3 % of a delete's CPU, measured).
 */
export function removeTree(target: string): void {
  if (lstatSync(target, { throwIfNoEntry: false })) rmSync(target, { recursive: true, force: true });
}

const ownUid = () => process.getuid?.() ?? 0;
/** Root and the agent's user are the only ones whose folders and links the agent follows. */
const trusted = (stat: Stats) => stat.uid === 0 || stat.uid === ownUid();
const othersMayWrite = (stat: Stats) => (stat.mode & 0o022) !== 0;
const sticky = (stat: Stats) => (stat.mode & 0o1000) !== 0;
/** Every folder from `/` down to `folder`, itself included. */
const prefixes = (folder: string) => folder.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/') || '/');

function lstatIfThere(file: string): Stats | undefined {
  try {
    return lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Why another user could change what lies in a folder, or undefined when none can: it is a real folder
 * of root or the agent's user, and others may not write in it (or, where they may, the sticky bit keeps
 * them from moving what is not theirs).
 */
function folderProblem(stat: Stats): string | undefined {
  if (stat.isSymbolicLink()) return 'is a symbolic link: the agent works only in a real folder';
  if (!stat.isDirectory()) return 'is not a folder';
  if (!trusted(stat)) return `belongs to another user (uid ${stat.uid}): it must be root's or the agent's`;
  if (othersMayWrite(stat) && !sticky(stat)) return `may be written by other users (mode ${(stat.mode & 0o7777).toString(8)}) without the sticky bit`;
  return undefined;
}

/**
 * The folders above the run folder, as given and as resolved: none may let another user swap what lies
 * below it, and a link on the way must be root's or the agent's.
 */
function checkAncestry(parent: string, below = 'the run folder'): void {
  for (const dir of prefixes(parent)) {
    const stat = lstatSync(dir);
    if (stat.isSymbolicLink() && !trusted(stat)) throw new ConfigError(`The link '${dir}' above ${below} belongs to another user (uid ${stat.uid}).`);
  }
  for (const dir of prefixes(realpathSync(parent))) {
    const problem = folderProblem(lstatSync(dir));
    if (problem) throw new ConfigError(`The folder '${dir}' above ${below} ${problem}.`);
  }
}

/**
 * A unix socket path the agent listens on (the metrics endpoint), checked by the run folder's rule: no folder
 * on the way another user can change, no link of another user; a file already there must be a socket of
 * root or the agent's user (left by an earlier run), which may be replaced. Throws ConfigError saying why not.
 */
export function checkSocketPlace(socket: string): void {
  const file = path.resolve(socket);
  try {
    checkAncestry(path.dirname(file), `the socket '${file}'`);
    const there = lstatIfThere(file);
    if (there && !there.isSocket()) throw new ConfigError(`'${file}' exists and is no socket.`);
    if (there && !trusted(there)) throw new ConfigError(`The socket '${file}' belongs to another user (uid ${there.uid}): it must be root's or the agent's.`);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`Cannot use the socket '${file}': ${(err as Error).message}`);
  }
}

/**
 * Creates the shared run folder and opens up its mode through a descriptor of the folder just made (never
 * through a path another user could swap for a link in between). One made meanwhile by someone else is
 * left as it is, for the checks to judge.
 */
function makeSharedFolder(folder: string): void {
  try {
    mkdirSync(folder, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw err;
  }
  const fd = openSync(folder, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    // Not left to the umask: the folder must be usable by agents of other users.
    if (fstatSync(fd).uid === ownUid()) fchmodSync(fd, SHARED_RUN_FOLDER_MODE);
  } finally {
    closeSync(fd);
  }
}

/** The io folder is the agent's user's alone. */
function ioFolderProblem(stat: Stats): string | undefined {
  if (folderProblem(stat)) return folderProblem(stat);
  if (stat.uid !== ownUid()) return `belongs to another user (uid ${stat.uid})`;
  return othersMayWrite(stat) ? "may be written by other users: it must be the agent's alone" : undefined;
}

function makeFolder(folder: string, mode: number): void {
  try {
    mkdirSync(folder, { mode });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * swdd~agent-prepares-dedicated-run-folder~2: makes sure `<run folder>/<agent>_io/` is there and that no
 * other user can steer a path below it. The agent runs as root and works on these paths by name (mkdir,
 * mkfifo, rm -r, bind mounts), so every folder on the way must be one no other user can change: the
 * folders above the run folder (checkAncestry), the run folder itself (root's or the agent's, not a link;
 * writable by others only with the sticky bit, as the default one is made) and the io folder (the agent's
 * user's, written by nobody else). Then nothing below the io folder is made or swapped by anyone but the
 * agent and, inside its Control Interface folder, the workload (fifo.ts opens those with O_NOFOLLOW).
 * The default run folder is created when missing; a custom one must exist. Nothing that exists already is
 * chmod'ed. Returns the io folder; throws ConfigError naming the folder and what is wrong.
 */
export function prepareRunFolder(runFolder: string, agentName: string, isDefault: boolean): string {
  // Resolved without its trailing slash: `lstat('link/')` would follow the link.
  const folder = path.resolve(runFolder);
  const ioFolder = path.join(folder, `${agentName}_io`);
  try {
    checkAncestry(path.dirname(folder));
    if (!lstatIfThere(folder)) {
      if (!isDefault) throw new ConfigError(`The run folder '${folder}' does not exist: create it, or leave -r out for the default.`);
      makeSharedFolder(folder);
    }
    const problem = folderProblem(lstatSync(folder));
    if (problem) throw new ConfigError(`The run folder '${folder}' ${problem}.`);
    makeFolder(ioFolder, 0o755);
    const ioProblem = ioFolderProblem(lstatSync(ioFolder));
    if (ioProblem) throw new ConfigError(`The run folder '${ioFolder}' ${ioProblem}.`);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`Cannot prepare the run folder '${ioFolder}': ${(err as Error).message}`);
  }
  return ioFolder;
}

/**
 * A path the agent hands to Podman as a bind-mount source, checked right before: every part of it below
 * the io folder is a real file or folder (Podman follows links). Throws naming the first link.
 */
export function assertNoLinks(ioFolder: string, target: string): void {
  const relative = path.relative(ioFolder, target);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) throw new Error(`'${target}' is not below the agent's folder.`);
  let current = ioFolder;
  for (const part of relative.split(path.sep)) {
    current = path.join(current, part);
    if (lstatSync(current).isSymbolicLink()) throw new Error(`'${current}' is a symbolic link: a mount source must not lead elsewhere.`);
  }
}
