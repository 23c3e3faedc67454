// What every bench part shares: the figures it records (printed as they come, written to bench/results.json at
// the end) and the few statistics the parts take of their samples.
import { readFileSync } from 'node:fs';

export interface Figure {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly target?: string;
  readonly note?: string;
}

export const figures: Figure[] = [];

export function record(f: Figure): void {
  figures.push(f);
  console.log(
    `  ${f.name.padEnd(62)} ${String(Number(f.value.toFixed(2))).padStart(10)} ${f.unit.padEnd(10)} ${f.target ? `target ${f.target}` : ''}${f.note ? `  (${f.note})` : ''}`,
  );
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
export const p95 = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU time of a process so far, in ms: its own, and that of its children it has waited for (the runtime's processes). */
export function cpuMs(pid: number): { own: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  const tick = 1000 / 100;
  return { own: (f[11] + f[12]) * tick, children: (f[13] + f[14]) * tick };
}
