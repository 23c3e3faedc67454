// What every bench part shares: the figures it records (printed as they come, written to bench/results.json at
// the end) and the few statistics the parts take of their samples.
import { readFileSync } from 'node:fs';
import path from 'node:path';

export interface Figure {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly target?: string;
  readonly note?: string;
  /** Whether the value meets a target that is a bound (`≤3`, `<50`, `≥49929 (released)`, `0`); said, not left to the reader. */
  readonly met?: boolean;
}

export const figures: Figure[] = [];

export function record(f: Figure): void {
  const met = f.target === undefined ? undefined : meets(f.value, f.target);
  figures.push({ ...f, met });
  const verdict = met === undefined ? '' : met ? ': met' : ': MISSED';
  console.log(
    `  ${f.name.padEnd(62)} ${String(Number(f.value.toFixed(2))).padStart(10)} ${f.unit.padEnd(10)} ${f.target ? `target ${f.target}${verdict}` : ''}${f.note ? `  (${f.note})` : ''}`,
  );
}

/** The verdict on a target that starts with a bound; none for the others (`≈0`). */
function meets(value: number, target: string): boolean | undefined {
  const bound = /^([≤<≥>]?)\s*(-?\d+(?:\.\d+)?)/.exec(target);
  if (bound === null) return undefined;
  const limit = Number(bound[2]);
  const rounded = Number(value.toFixed(2));
  return { '≤': rounded <= limit, '<': rounded < limit, '≥': rounded >= limit, '>': rounded > limit, '': rounded === limit }[bound[1]];
}

/** The released agent's figure, then ours with its target: at most `factor` × the released agent's. */
export function beside(label: string, unit: string, ours: number, released: number, factor: number, note = ''): void {
  record({ name: `${label}: released agent`, value: released, unit });
  record({
    name: `${label}: ours`,
    value: ours,
    unit,
    target: `≤${Number((factor * released).toFixed(2))} (${factor} × released)`,
    note: `${(ours / released).toFixed(2)} ×${note ? `; ${note}` : ''}`,
  });
}

export const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
export const p90 = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.9))];
export const p95 = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU time of an agent so far, in ms: its own (with its launcher shell's), and that of the processes waited for (the runtime's). */
export function cpuMs(pid: number): { own: number; children: number } {
  return [pid, ...launcherShells(pid)].map(processCpuMs).reduce((sum, cpu) => ({ own: sum.own + cpu.own, children: sum.children + cpu.children }));
}

/**
 * The CPU of the Podman service an agent of ours started in its io folder (lib/runtimes/podman/service.ts), with
 * what it waited for: the runtime's CPU that is no child of the agent's while the service runs. 0 without one.
 */
export function podmanServiceCpuMs(ioFolder: string): number {
  try {
    const cpu = processCpuMs(Number(readFileSync(path.join(ioFolder, 'podman.sock.pid'), 'utf8')));
    return cpu.own + cpu.children;
  } catch {
    return 0;
  }
}

function processCpuMs(pid: number): { own: number; children: number } {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return { own: 0, children: 0 };
  }
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  const tick = 1000 / 100;
  return { own: (f[11] + f[12]) * tick, children: (f[13] + f[14]) * tick };
}

/** The agent's launcher shell (lib/drivers/launcher.ts): its own CPU is the agent's, what it waited for the runtime's. */
function launcherShells(pid: number): number[] {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
    return children.filter((child) => {
      try {
        return readFileSync(`/proc/${child}/comm`, 'utf8').trim() === 'sh';
      } catch {
        return false;
      }
    });
  } catch {
    return [];
  }
}
