// What tells the container cache of Podman's containers without a poll: `podman events`, and conmon's
// exit files, which come first.
import { type FSWatcher, existsSync, readFileSync, watch } from 'node:fs';
import path from 'node:path';
import { Observable, type TimestampProvider } from 'rxjs';
import { EXIT_FILE_TAKEN } from '../../container-view.js';
import { spread } from '../../spread.js';
import type { ContainerChange, ContainerEvent } from '../../ports.js';
import type { PodmanCli } from './podman-cli.js';

/** Podman's words of its events, as the cache's; the others say nothing of a container's state. */
const PODMAN_CHANGES: Readonly<Record<string, ContainerChange>> = {
  create: 'created',
  init: 'initialized',
  start: 'started',
  died: 'exited',
  cleanup: 'exited',
  remove: 'removed',
  pause: 'paused',
  unpause: 'resumed',
};

/**
 * Podman's container events from one long-running `podman events` (no periodic calls): a `died` event
 * carries the exit code. Podman passes on only the events above: an exec, a health check or a stop makes no
 * line to read. Ends when the process ends (the cache starts it again); lines that are no event are passed over.
 */
export function containerEvents(cli: PodmanCli): Observable<ContainerEvent> {
  return cli.containerEvents(Object.keys(PODMAN_CHANGES)).pipe(
    spread((line): ContainerEvent[] => {
      try {
        const e = JSON.parse(line) as {
          ID?: unknown;
          Status?: unknown;
          ContainerExitCode?: unknown;
          Time?: unknown;
          Name?: unknown;
          Attributes?: unknown;
          PodID?: unknown;
        };
        const change = typeof e.Status === 'string' ? PODMAN_CHANGES[e.Status] : undefined;
        if (typeof e.ID !== 'string' || change === undefined) return [];
        const at = typeof e.Time === 'string' ? Date.parse(e.Time) : Number.NaN;
        return [
          {
            id: e.ID,
            change,
            exitCode: typeof e.ContainerExitCode === 'number' ? e.ContainerExitCode : undefined,
            at: Number.isFinite(at) ? at : undefined,
            container:
              typeof e.Name === 'string' ? { names: [e.Name], labels: labelsOf(e.Attributes), pod: typeof e.PodID === 'string' ? e.PodID : '' } : undefined,
          },
        ];
      } catch {
        return [];
      }
    }),
  );
}

/** An event's attributes as labels: Podman puts a container's labels there (and its image's name), strings only. */
function labelsOf(attributes: unknown): Record<string, string> {
  if (typeof attributes !== 'object' || attributes === null) return {};
  return Object.fromEntries(Object.entries(attributes).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

/** Where conmon writes a container's exit code the moment it exits (rootful Podman). */
export const CONMON_EXIT_DIR = '/run/libpod/exits';

/**
 * The exits conmon records in its exit folder, as exits: they come as the container exits, some
 * 100–200 ms before Podman's own `died` event (which waits for `podman container cleanup`); a file that
 * goes is EXIT_FILE_TAKEN (Podman has taken the exit in). Nothing when the folder is not there.
 */
export function conmonExits(clock: TimestampProvider, dir = CONMON_EXIT_DIR): Observable<ContainerEvent> {
  return new Observable<ContainerEvent>((subscriber) => {
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, (_event, name) => {
        if (!name || !/^[0-9a-f]{64}$/.test(name)) return;
        const file = path.join(dir, name);
        let text: string | undefined;
        try {
          // Asked first: a file gone (at every removal) would cost an exception, dearer than the read itself.
          if (existsSync(file)) text = readFileSync(file, 'utf8');
        } catch {
          // Gone meanwhile.
        }
        if (text === undefined) {
          // Podman took it (a cleanup, or a start of the container again).
          subscriber.next({ id: name, change: EXIT_FILE_TAKEN });
          return;
        }
        const code = Number(text.slice(0, 16).trim());
        if (Number.isInteger(code)) subscriber.next({ id: name, change: 'exited', exitCode: code, at: clock.now() });
      });
    } catch {
      subscriber.complete();
      return undefined;
    }
    watcher.on('error', () => subscriber.complete());
    return () => watcher.close();
  });
}
