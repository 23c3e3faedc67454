// Reads the machine's CPU times and free memory from /proc.
import { readFileSync } from 'node:fs';
import type { MachineSample } from '../ports.js';

/** The first line of /proc/stat: `cpu user nice system idle iowait irq softirq steal …`. */
export function parseProcStat(text: string): { cpuBusy: number; cpuTotal: number } {
  const fields = (text.split('\n').find((l) => l.startsWith('cpu ')) ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { cpuBusy: total - idle, cpuTotal: total };
}

/** MemFree of /proc/meminfo, in bytes. */
export function parseMemFree(text: string): number {
  const kib = /^MemFree:\s+(\d+) kB/m.exec(text)?.[1];
  return kib === undefined ? 0 : Number(kib) * 1024;
}

export function sampleMachine(): MachineSample {
  return { ...parseProcStat(readFileSync('/proc/stat', 'utf8')), freeMemory: parseMemFree(readFileSync('/proc/meminfo', 'utf8')) };
}
