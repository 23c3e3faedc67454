// What a process holds, to find what a run left behind: its handles by kind, its child processes, its sockets.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** This process's handles that keep it alive, by kind (timers, pipes, processes, file watchers). */
export function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

/** What `after` holds more of than `before`, by kind. */
export const more = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(Object.entries(after).filter(([kind, n]) => n > (before[kind] ?? 0)));

/** This process's child processes, by pid. */
export const children = (): string[] =>
  readdirSync(`/proc/${process.pid}/task`).flatMap((task) => readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean));

/** This process's open sockets (kept-alive connections do not keep it alive, so are no handles). */
export const sockets = (): string[] =>
  readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return target.startsWith('socket:') ? [target] : [];
    } catch {
      return [];
    }
  });
