// Small tmpfs mounts for the specs of a full, inode-less or read-only place, and an unprivileged user to fill
// them (as another user on the node would fill /tmp). Needs root.
import { execFileSync, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { specFolder } from './temp.js';

export class Tmpfs {
  private readonly mounted: string[] = [];

  /** A tmpfs anyone may write to, as /tmp is: `options` as mount takes them (`size=64k`, `nr_inodes=8`, `ro`). */
  mount(options: string): string {
    const dir = specFolder('ank-tmpfs-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', `mode=1777,${options}`, 'tmpfs', dir]);
    this.mounted.push(dir);
    return dir;
  }

  /** Unmounts and removes every mount made. */
  unmountAll(): void {
    for (const dir of this.mounted.splice(0)) {
      // A process of the spec still on its way out (the launcher's shell) can keep the mount busy for a moment:
      // then it is detached at once and freed when that process is gone, so that its folder can go now.
      if (spawnSync('umount', [dir]).status !== 0) spawnSync('umount', ['--lazy', dir]);
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

/** Runs a shell script as the unprivileged user nobody (to fill a place: all its blocks, or all its inodes). */
export const asNobody = (script: string): void => {
  spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-c', script], { stdio: 'ignore' });
};
