// The agent's resource availability, sent to the server every two seconds.
import { EMPTY, type Observable, defer, map, switchMap, timer } from 'rxjs';
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

/**
 * A LoadStatus right after each connection is up (`online$` says true), then every interval while it
 * lasts, with the CPU usage since the sample before (the first: since the subscription).
 */
export function loadStatus(sample: () => MachineSample, online$: Observable<boolean>): Observable<LoadStatus> {
  return defer(() => {
    let previous = sample();
    return online$.pipe(
      switchMap((online) => (online ? timer(0, LOAD_STATUS_INTERVAL_MS) : EMPTY)),
      map(() => {
        const now = sample();
        const status = { cpuUsage: cpuPercent(previous, now), freeMemory: now.freeMemory };
        previous = now;
        return status;
      }),
    );
  });
}
