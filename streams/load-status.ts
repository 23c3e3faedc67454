// The agent's resource availability, sent to the server every two seconds.
import { Observable, defer, interval, map, pairwise, startWith } from 'rxjs';
import type { MachineSample } from '../lib/ports.js';


export interface LoadStatus {
  /** Whole-machine CPU usage in percent since the previous sample. */
  readonly cpuUsage: number;
  /** Free memory in bytes. */
  readonly freeMemory: number;
}

export const LOAD_STATUS_INTERVAL_MS = 2000;

/** cpu_usage = (new_work_time - old_work_time) / (new_total_time - old_total_time) * 100 */
export function cpuPercent(before: MachineSample, after: MachineSample): number {
  const total = after.cpuTotal - before.cpuTotal;
  if (total <= 0) return 0;
  return Math.min(100, Math.max(0, Math.round(((after.cpuBusy - before.cpuBusy) / total) * 100)));
}

/** A LoadStatus every interval, from samples taken then. */
export function loadStatus(sample: () => MachineSample): Observable<LoadStatus> {
  return defer(() => interval(LOAD_STATUS_INTERVAL_MS).pipe(
    map(() => sample()),
    startWith(sample()),
    pairwise(),
    map(([before, after]) => ({ cpuUsage: cpuPercent(before, after), freeMemory: after.freeMemory })),
  ));
}
