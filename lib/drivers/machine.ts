// Reads the machine's CPU times and free memory from /proc, and finds processes there by their environment.
import { closeSync, lstatSync, openSync, readFileSync, readSync, readdirSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { MachineSample } from '../ports.js';

/** The first line of /proc/stat: `cpu user nice system idle iowait irq softirq steal …`. */
export function parseProcStat(text: string): { cpuBusy: number; cpuTotal: number } {
  const end = text.indexOf('\n');
  const first = !text.startsWith('cpu ') ? '' : end < 0 ? text : text.slice(0, end);
  const fields = first.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { cpuBusy: total - idle, cpuTotal: total };
}

/** MemFree of /proc/meminfo, in bytes. */
export function parseMemFree(text: string): number {
  const kib = /^MemFree:\s+(\d+) kB/m.exec(text)?.[1];
  return kib === undefined ? 0 : Number(kib) * 1024;
}

/**
 * The start of a /proc file, read again from its beginning through a descriptor kept open: what the agent
 * reads every 2 s is the first line or two (of /proc/stat's thousands of bytes), and opening the file anew and
 * reading it whole each time was most of an idle agent's CPU.
 */
class ProcHead {
  private fd?: number;
  private readonly buffer: Buffer;

  constructor(
    private readonly file: string,
    bytes: number,
  ) {
    this.buffer = Buffer.alloc(bytes);
  }

  read(): string {
    try {
      this.fd ??= openSync(this.file, 'r');
      return this.buffer.toString('latin1', 0, readSync(this.fd, this.buffer, 0, this.buffer.length, 0));
    } catch {
      // A descriptor gone bad is opened again next time; a file that cannot be read reads as nothing.
      if (this.fd !== undefined) closeSync(this.fd);
      this.fd = undefined;
      return '';
    }
  }
}

const procStat = new ProcHead('/proc/stat', 512);
const procMeminfo = new ProcHead('/proc/meminfo', 256);

export function sampleMachine(): MachineSample {
  return { ...parseProcStat(procStat.read()), freeMemory: parseMemFree(procMeminfo.read()) };
}

/**
 * Kills every process whose environment carries `marker` (`NAME=value`), as root sees them all in /proc: what a
 * health check started in a container, and what it forked, however it hangs. Passes until none is found (a
 * process may fork while it is being killed), at most a few.
 */
export function killMarkedProcesses(marker: string): number {
  const needle = Buffer.from(`\0${marker}\0`);
  let killed = 0;
  for (let pass = 0; pass < 5; pass++) {
    let found = 0;
    for (const [pid, environ] of eachProcess('environ')) {
      if (!Buffer.concat([Buffer.from([0]), environ]).includes(needle)) continue;
      try {
        process.kill(pid, 'SIGKILL');
        found += 1;
      } catch {
        // gone already
      }
    }
    killed += found;
    if (found === 0) break;
  }
  return killed;
}

/** Every process with its /proc/<pid>/`file` (cmdline, environ), leaving out those gone meanwhile or not ours to read. */
export function* eachProcess(file: 'cmdline' | 'environ'): Iterable<[pid: number, content: Buffer]> {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      yield [Number(pid), readFileSync(`/proc/${pid}/${file}`)];
    } catch {
      // gone, or not ours to read
    }
  }
}

/** The argv of process `pid` when it is the agent's own user's (every user id of it), else undefined. */
export function ownArgv(pid: number): string[] | undefined {
  try {
    const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    const uid = process.getuid?.() ?? 0;
    if (!uids || uids.slice(1).some((u) => Number(u) !== uid)) return undefined;
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
  } catch {
    return undefined;
  }
}

/**
 * The processes of the agent's own user whose executable, as the kernel links it, is `executable` (its links
 * resolved), each with its argv: what no other user can make, whatever its argv says. A process that ended and
 * whose pid was taken meanwhile is checked again after its argv is read.
 */
export function* ownProcessesOf(executable: string): Iterable<{ readonly pid: number; readonly argv: readonly string[] }> {
  let wanted: string;
  try {
    wanted = realpathSync(executable);
  } catch {
    return;
  }
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    try {
      if (readlinkSync(`/proc/${pid}/exe`) !== wanted) continue;
      const argv = ownArgv(pid);
      if (argv && readlinkSync(`/proc/${pid}/exe`) === wanted) yield { pid, argv };
    } catch {
      // Gone, or not ours to read.
    }
  }
}

/** Whether process `pid` is stopped (SIGSTOP, a debugger) and the CPU time it has used, in ticks (/proc/<pid>/stat); undefined once it is gone. */
export function processWork(pid: number): { readonly stopped: boolean; readonly cpuTicks: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // After the command's name (in parentheses, which may hold anything): the state, then utime and stime as the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { stopped: fields[0] === 'T' || fields[0] === 't', cpuTicks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return undefined;
  }
}

/** The bytes a process has read so far, sockets included (/proc/<pid>/io): a download's progress. Undefined once it is gone. */
export function bytesRead(pid: number): number | undefined {
  try {
    const rchar = /^rchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return rchar ? Number(rchar[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The folders of a pull's partial download that a process has files open in: Podman keeps a layer it fetches
 * in `/var/tmp/storage<digits>/` and removes the folder only when the pull ends by itself, not when it is killed.
 */
export function downloadFoldersOf(pid: number): string[] {
  const folders = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const folder = path.dirname(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (/^storage\d+$/.test(path.basename(folder))) folders.add(folder);
      } catch {
        // Closed meanwhile.
      }
    }
  } catch {
    // Gone.
  }
  return [...folders];
}

/** Removes those folders once their process has ended: real folders of this user's only, never a link. */
export function removeDownloadFolders(folders: readonly string[]): void {
  for (const folder of folders) {
    try {
      const stat = lstatSync(folder);
      if (stat.isDirectory() && stat.uid === process.getuid?.()) rmSync(folder, { recursive: true, force: true });
    } catch {
      // Gone already.
    }
  }
}
