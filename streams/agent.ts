// The whole agent as one function from what it hears to what it says: server messages and Control
// Interface pipes in; messages to the server and frames to the workloads out.
import {
  BehaviorSubject,
  EMPTY,
  type MonoTypeOperatorFunction,
  type Observable,
  Subject,
  endWith,
  filter,
  ignoreElements,
  map,
  merge,
  share,
  takeUntil,
  tap,
} from 'rxjs';
import { type Connection, NOT_CONNECTED, nextConnection } from '../lib/control-interface/connection.js';
import type { Logger } from '../lib/logger.js';
import type { FromServer, LogEntry, ToServer } from '../lib/messages.js';
import type { MetricsEvent } from '../lib/metrics.js';
import type { ControlInterfacePipe, MachineSample, WorkloadFrame } from '../lib/ports.js';
import { RunningWorkloads } from '../lib/running-workloads.js';
import { WorkloadStateStore } from '../lib/state-store.js';
import { type ControlInterfaceOutput, controlInterfaces } from './control-interfaces.js';
import { loadStatus } from './load-status.js';
import { TRUNCATED_INFO, serveLogs } from './logs.js';
import { type WorkloadDeps, runWorkloads } from './run-workloads.js';
import { type Trace, noTrace } from './trace.js';

export interface AgentSources {
  /** What the server (or the local server of standalone mode) sends; completes when the link is closed for good. */
  readonly fromServer$: Observable<FromServer>;
  /** The workloads' Control Interfaces, as they are opened. */
  readonly controlInterfaces$: Observable<ControlInterfacePipe>;
  /** Frames the Control Interface pipes could not deliver (the workload is gone from its pipe). */
  readonly undelivered$?: Observable<WorkloadFrame>;
}

export interface AgentDeps extends WorkloadDeps {
  readonly log: Logger;
  readonly trace?: Trace;
  /** Reads the machine's load, sent to the server as AgentLoadStatus every 2 s (connected mode). */
  readonly sampleMachine?: () => MachineSample;
  /** True while the server connection cannot take more (the log streams wait then). */
  readonly serverFull$?: Observable<boolean>;
  /** Told what the agent does, for its metrics endpoint (--metrics). */
}

export interface AgentSinks {
  readonly toServer$: Observable<ToServer>;
  readonly toWorkloads$: Observable<WorkloadFrame>;
  /** What the metrics add up (lib/metrics.ts), as it happens; ends with the other sinks. */
  readonly metrics$: Observable<MetricsEvent>;
}

const only = <K extends ControlInterfaceOutput['kind']>(kind: K) =>
  filter((o: ControlInterfaceOutput): o is Extract<ControlInterfaceOutput, { kind: K }> => o.kind === kind);

/** The entries of a log response, their bytes, and how many say a line before them was cut. */
function logFigures(entries: readonly LogEntry[]): { count: number; bytes: number; cut: number } {
  let bytes = 0;
  let cut = 0;
  for (const e of entries) {
    bytes += e.bytes;
    if (e.message === TRUNCATED_INFO) cut += 1;
  }
  return { count: entries.length, bytes, cut };
}

/**
 * swdd~agent-shall-use-interfaces-to-server~1: the sinks end when the server link ends (after a stop)
 * and error when the server refuses the agent (ServerRefused).
 */
export function agent(sources: AgentSources, deps: AgentDeps): AgentSinks {
  const trace = deps.trace ?? noTrace;
  // The agent's own current states, sent again on each new connection so the server forgets
  // that it had marked them disconnected.
  const current = new WorkloadStateStore();
  // The connection is kept as the messages pass, not by a subscription of its own: a first subscriber
  // would take what a synchronous source (the local server) says at once. It ends with the link.
  const connection$ = new BehaviorSubject(NOT_CONNECTED);
  // What the metrics need, told as the messages pass (the metrics$ sink).
  const metrics$ = new Subject<MetricsEvent>();
  const closed$ = connection$.pipe(ignoreElements(), endWith(null));
  const fromServer$ = sources.fromServer$.pipe(trace('server.in'), keptConnection(connection$, metrics$), share());
  const online$ = connection$.pipe(map((c) => c.online));

  const running = deps.running ?? new RunningWorkloads();
  const states$ = runWorkloads(fromServer$, { ...deps, running }).pipe(
    trace('workload.states'),
    tap((states) => {
      current.update(states);
      metrics$.next({ kind: 'states', states });
    }),
    map((states): ToServer => ({ kind: 'updateWorkloadState', states })),
  );
  // swdd~agent-sends-workload-states-of-its-workloads-to-server~2: a server that accepted the agent hears its
  // current states first (before the states its ServerHello causes).
  const greeting$ = fromServer$.pipe(
    filter((m) => m.kind === 'connected'),
    map(() => current.all()),
    filter((states) => states.length > 0),
    map((states): ToServer => ({ kind: 'updateWorkloadState', states })),
  );
  const ci = controlInterfaceSides(sources, fromServer$, connection$, deps, metrics$);
  const load$ = deps.sampleMachine
    ? loadStatus(deps.sampleMachine, online$).pipe(map((l): ToServer => ({ kind: 'agentLoadStatus', agentName: deps.agentName, ...l })))
    : EMPTY;
  const logs$ = serveLogs(fromServer$, { ...deps, running }).pipe(
    trace('logs'),
    tap((m) => m.kind === 'logEntries' && metrics$.next({ kind: 'logEntries', ...logFigures(m.entries) })),
  );

  return {
    // The workloads first: a synchronous source (the local server) says all it says at once to the first subscriber.
    toServer$: merge(states$, greeting$, ci.requests$, load$, logs$, ci.logged$).pipe(takeUntil(closed$), trace('server.out')),
    toWorkloads$: ci.toWorkloads$.pipe(takeUntil(closed$)),
    metrics$: metrics$.pipe(takeUntil(closed$)),
  };
}

/** The server's messages, the connection kept in `connection$` as they pass (and told to the metrics when it goes on- or offline). */
const keptConnection =
  (connection$: BehaviorSubject<Connection>, metrics$: Subject<MetricsEvent>): MonoTypeOperatorFunction<FromServer> =>
  (messages$) =>
    messages$.pipe(
      tap({
        next: (m) => {
          const next = nextConnection(connection$.value, m);
          if (next.online !== connection$.value.online) metrics$.next({ kind: 'connection', online: next.online, line: next.lines[0]?.name });
          if (next !== connection$.value) connection$.next(next);
        },
        complete: () => connection$.complete(),
      }),
    );

/**
 * The Control Interfaces' sides: the requests they send the server, what they write to their workloads, and
 * their log lines and authorization decisions (logged and told to the metrics; they emit nothing).
 */
function controlInterfaceSides(
  sources: AgentSources,
  fromServer$: Observable<FromServer>,
  connection$: Observable<Connection>,
  deps: AgentDeps,
  metrics$: Subject<MetricsEvent>,
) {
  const trace = deps.trace ?? noTrace;
  const responses$ = fromServer$.pipe(
    filter((m) => m.kind === 'response'),
    map((m) => m.response),
    trace('control-interface.responses'),
  );
  const ci$ = controlInterfaces({ pipes$: sources.controlInterfaces$, responses$, connection$, undelivered$: sources.undelivered$ ?? EMPTY }).pipe(share());
  return {
    requests$: ci$.pipe(
      only('toServer'),
      map((o) => o.request),
      trace('control-interface.requests'),
      map((request): ToServer => ({ kind: 'request', request })),
    ),
    toWorkloads$: ci$.pipe(
      only('toWorkload'),
      map((o) => o.frame),
    ),
    logged$: merge(
      ci$.pipe(
        only('log'),
        tap((o) => deps.log[o.level](o.text)),
      ),
      ci$.pipe(
        only('authorized'),
        tap((o) => metrics$.next({ kind: 'authorized', workloadName: o.workloadName, allowed: o.allowed })),
      ),
    ).pipe(ignoreElements()),
  };
}
