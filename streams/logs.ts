// Workload logs for the server: a LogsRequest starts a log stream per workload of this agent, sent in
// bounded batches, each ended by a LogsStopResponse; a LogsCancelRequest stops the streams.
import { EMPTY, type Observable, bufferTime, catchError, concat, defer, filter, map, merge, mergeMap, of, share, takeUntil } from 'rxjs';
import type { Logger } from '../lib/logger.js';
import { MAX_LINE_BYTES } from '../lib/log-lines.js';
import { type FromServer, type LogEntry, type LogsOptions, type ToServer, logEntry } from '../lib/messages.js';
import type { RunningWorkloads } from '../lib/running-workloads.js';
import { type WorkloadInstanceName, instanceKey } from '../lib/workload.js';

/** No response may exceed this, so a chatty workload cannot break the gRPC message limit. */
export const MAX_RESPONSE_BYTES = 2 * 1024 * 1024;
/** Room for the envelope of each entry and of the response. */
const ENTRY_OVERHEAD_BYTES = 256;
export const TRUNCATED = ' [truncated]';
/** The entry after a cut one (the released agent's words). */
export const TRUNCATED_INFO = 'The previous message was truncated due to exceeding the maximum 2 MB size.';
export const BATCH_MS = 100;
export const BATCH_LINES = 1000;

export interface LogsDeps {
  readonly agentName: string;
  /** The workloads this agent runs: a request is resolved against them, without asking the runtime. */
  readonly running: RunningWorkloads;
  readonly log?: Logger;
  /**
   * True while the server connection cannot take more: the log streams are not read then, so a workload
   * that prints without end costs the agent bounded memory and states never queue behind gigabytes of logs.
   */
  readonly serverFull$?: Observable<boolean>;
}

type LogsRequest = Extract<FromServer, { kind: 'logsRequest' }>;

/** A line cut to fit a response, marked when cut. */
export function fitLine(line: string, maxBytes = MAX_LINE_BYTES): string {
  return Buffer.byteLength(line) <= maxBytes ? line : cutLine(line, maxBytes);
}

function cutLine(line: string, maxBytes: number): string {
  let cut = Buffer.from(line)
    .subarray(0, maxBytes - Buffer.byteLength(TRUNCATED))
    .toString();
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return cut + TRUNCATED;
}

/**
 * swdd~agent-checks-size-of-logs~1: a line too long for a response is cut, marked, and followed by an
 * entry that says so (both fit one response: MAX_LINE_BYTES leaves room). A line's bytes are counted here,
 * once: the entry carries them.
 */
export function entriesOf(instanceName: WorkloadInstanceName, line: string): LogEntry[] {
  const bytes = Buffer.byteLength(line);
  if (bytes <= MAX_LINE_BYTES) return [logEntry(instanceName, line, bytes)];
  return [logEntry(instanceName, cutLine(line, MAX_LINE_BYTES)), logEntry(instanceName, TRUNCATED_INFO)];
}

/** Splits entries into groups whose responses stay under the limit. */
export function splitBySize(entries: readonly LogEntry[], maxBytes = MAX_RESPONSE_BYTES): LogEntry[][] {
  const groups: LogEntry[][] = [];
  let group: LogEntry[] = [];
  let size = 0;
  for (const e of entries) {
    const bytes = e.bytes + instanceKey(e.instanceName).length + ENTRY_OVERHEAD_BYTES;
    if (group.length > 0 && size + bytes > maxBytes) {
      groups.push(group);
      group = [];
      size = 0;
    }
    group.push(e);
    size += bytes;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** One workload's logs for one request: batches of entries, then the stop response. */
function workloadLogs(requestId: string, instanceName: WorkloadInstanceName, options: LogsOptions, deps: LogsDeps): Observable<ToServer> {
  return defer(() => {
    const found = deps.running.find(instanceName);
    if (!found) {
      deps.log?.debug(`Logs of '${instanceKey(instanceName)}' asked for, but this agent does not run it.`);
      return EMPTY;
    }
    const batches$ = found.runtime.logs(found.id, options, deps.serverFull$).pipe(
      // A cut line and the entry after it stay in one batch.
      map((line) => entriesOf(instanceName, line)),
      bufferTime(BATCH_MS, null, BATCH_LINES),
      filter((lines) => lines.length > 0),
      map((lines) => lines.flat()),
      mergeMap((entries) => splitBySize(entries).map((group): ToServer => ({ kind: 'logEntries', requestId, entries: group }))),
      catchError((err: unknown) => {
        deps.log?.warn(`The logs of '${instanceKey(instanceName)}' ended early: ${String(err)}`);
        return EMPTY;
      }),
    );
    return concat(batches$, of<ToServer>({ kind: 'logsStop', requestId, instanceName }));
  });
}

/** Answers the server's log requests until each is cancelled, its streams end, or the connection goes (the server forgot them then). */
export function serveLogs(fromServer$: Observable<FromServer>, deps: LogsDeps): Observable<ToServer> {
  return defer(() => {
    const messages$ = fromServer$.pipe(share());
    const cancels$ = messages$.pipe(filter((m): m is Extract<FromServer, { kind: 'logsCancelRequest' }> => m.kind === 'logsCancelRequest'));
    const disconnected$ = messages$.pipe(filter((m) => m.kind === 'disconnected'));
    return messages$.pipe(
      filter((m): m is LogsRequest => m.kind === 'logsRequest'),
      mergeMap((request) =>
        merge(...request.workloads.filter((w) => w.agentName === deps.agentName).map((w) => workloadLogs(request.requestId, w, request.options, deps))).pipe(
          takeUntil(merge(cancels$.pipe(filter((c) => c.requestId === request.requestId)), disconnected$)),
        ),
      ),
    );
  });
}
