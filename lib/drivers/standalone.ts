// The side effects of standalone mode: reading and watching the manifest, and showing the status.
import { type FSWatcher, readFileSync, unwatchFile, watch, watchFile } from 'node:fs';
import path from 'node:path';
import { Observable, debounceTime, distinctUntilChanged, filter, map, merge, of, skip, startWith } from 'rxjs';
import type { Logger } from '../logger.js';
import { parseManifest } from '../codec/manifest.js';
import { type DesiredState, ManifestError } from '../desired-state.js';
import { type LocalSnapshot, type StatusRow, formatTable, statusRows } from '../status.js';

/** A manifest as read: what it says, and its text (a later read that finds the same text is no change). */
export interface ManifestRead {
  readonly desired: DesiredState;
  readonly text: string;
}

/** Reads the manifest; throws ManifestError naming the file. */
export function readManifest(file: string, log: Logger): ManifestRead {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ManifestError(`Cannot read the manifest '${file}': ${(err as Error).message}`);
  }
  try {
    return { desired: parseManifest(text, (w) => log.warn(`${file}: ${w}`)), text };
  } catch (err) {
    throw new ManifestError(`The manifest '${file}' is invalid: ${(err as Error).message}`);
  }
}

/** How often the manifest's path is looked at again, whatever the folder watch says. */
export const MANIFEST_POLL_MS = 1000;

/**
 * The manifest now and after each change of the file; an invalid change is logged and skipped, so the
 * running workloads stay as they are. Any change in its folder makes it read again (editors replace files
 * by renaming; a Kubernetes ConfigMap swaps a `..data` symlink), and its path is looked at every second
 * too, so a folder replaced as a whole is followed as well.
 */
export function watchManifest(file: string, first: ManifestRead, log: Logger): Observable<DesiredState> {
  const changes$ = new Observable<void>((subscriber) => {
    const folder = path.dirname(path.resolve(file));
    let watcher: FSWatcher | undefined;
    try {
      watcher = watch(folder, () => subscriber.next());
      watcher.on('error', (err) => log.warn(`Cannot watch the folder of '${file}' any more: ${err.message}; it is still looked at every second.`));
    } catch (err) {
      log.warn(`Cannot watch the folder of '${file}': ${(err as Error).message}; it is looked at every second.`);
    }
    const poll = () => subscriber.next();
    watchFile(file, { interval: MANIFEST_POLL_MS }, poll);
    // A change between the first read and these watches shows in neither: read the file once more.
    subscriber.next();
    return () => {
      watcher?.close();
      unwatchFile(file, poll);
    };
  });
  return merge(
    of(first.desired),
    changes$.pipe(
      debounceTime(150),
      map(() => {
        try {
          return readFileSync(file, 'utf8');
        } catch {
          return undefined;
        }
      }),
      filter((text): text is string => text !== undefined),
      // Only a text other than the one last read is a change (a folder event or a poll says nothing of the content).
      startWith(first.text),
      distinctUntilChanged(),
      skip(1),
      map((text) => {
        try {
          const state = parseManifest(text, (w) => log.warn(`${file}: ${w}`));
          log.info(`Applying the changed manifest '${file}'.`);
          return state;
        } catch (err) {
          log.error(`Rejected the change of '${file}': ${(err as Error).message}. The workloads stay as they are.`);
          return undefined;
        }
      }),
      filter((s): s is DesiredState => s !== undefined),
    ),
  );
}

/**
 * The status view: on a terminal a table redrawn on change; otherwise one log line per state change.
 * Returns the function that takes each snapshot.
 */
export function statusView(agentName: string, out: NodeJS.WriteStream, log: Logger): (snapshot: LocalSnapshot) => void {
  if (out.isTTY) {
    // biome-ignore lint/correctness/noUnusedVariables: read by `??=` below, which the linter does not count
    let timer: NodeJS.Timeout | undefined;
    let latest: LocalSnapshot | undefined;
    let shown = '';
    const show = (snapshot: LocalSnapshot) => {
      latest = snapshot;
      timer ??= setTimeout(() => {
        timer = undefined;
        const table = formatTable(statusRows(agentName, latest!.desired, latest!.states));
        if (table !== shown) out.write(`\x1b[2J\x1b[H${table}\n\n(agent '${agentName}'; Ctrl-C stops the agent, the workloads keep running)\n`);
        shown = table;
      }, 100);
    };
    // A resized terminal garbles what was drawn: draw it again.
    out.on('resize', () => {
      shown = '';
      if (latest) show(latest);
    });
    return show;
  }
  const last = new Map<string, string>();
  const line = (r: StatusRow) => `${r.state}${r.info ? `: ${r.info}` : ''}`;
  return (snapshot) => {
    const rows = statusRows(agentName, snapshot.desired, snapshot.states);
    for (const row of rows) {
      if (last.get(row.workload) !== line(row)) log.info(`workload ${row.workload} (${row.agent || 'no agent'}): ${line(row)}`);
      last.set(row.workload, line(row));
    }
    for (const name of last.keys()) {
      if (!rows.some((r) => r.workload === name)) {
        log.info(`workload ${name}: no longer in the manifest`);
        last.delete(name);
      }
    }
  };
}
