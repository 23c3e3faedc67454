// The whole agent, connected: server link in, workload core, states out.
import { EMPTY, Observable, Subject, defer, filter, ignoreElements, map, merge, share, takeUntil, tap } from 'rxjs';
import type { Logger } from '../lib/logger.js';
import type { FromServer, ToServer, WireRequest, WireResponse } from '../lib/messages.js';
import { WorkloadStateStore } from '../lib/state-store.js';
import { type WorkloadDeps, runWorkloads } from './run-workloads.js';
import type { LoadStatus } from './load-status.js';
import { serveLogs } from './logs.js';
import { type Trace, noTrace } from './trace.js';

/**
 * Where the server's messages come from and the agent's go: the gRPC server link, or the local server of
 * standalone mode. `greeting` gives what to send first on each new connection.
 */
export type Link = (outbound$: Observable<ToServer>, greeting: () => ToServer[]) => Observable<FromServer>;

export interface AgentDeps extends WorkloadDeps {
  readonly link: Link;
  readonly log: Logger;
  readonly trace?: Trace;
  /** Samples of the machine's load, sent to the server as AgentLoadStatus every 2 s (connected mode). */
  readonly loadStatus$?: Observable<LoadStatus>;
  /** The workloads' Control Interfaces: their requests go to the server, the server's responses come back. */
  readonly controlInterfaces?: { readonly requests$: Observable<WireRequest>; deliver(response: WireResponse): void };
}

/**
 * swdd~agent-shall-use-interfaces-to-server~1: runs until the link ends (after a stop); errors only when
 * the server refuses the agent (ServerRefused).
 */
export function runAgent(deps: AgentDeps): Observable<never> {
  return defer(() => {
    const trace = deps.trace ?? noTrace;
    const toServer$ = new Subject<ToServer>();
    const linkClosed$ = new Subject<void>();
    // The agent's own current states, sent again after each reconnect so the server forgets
    // that it had marked them disconnected.
    const current = new WorkloadStateStore();
    const greeting = (): ToServer[] => {
      const states = current.all();
      return states.length > 0 ? [{ kind: 'updateWorkloadState', states }] : [];
    };
    const fromServer$ = deps.link(toServer$.pipe(trace('server.out')), greeting).pipe(
      trace('server.in'),
      tap({ complete: () => linkClosed$.next() }),
      share(),
    );
    const states$ = runWorkloads(fromServer$, deps).pipe(
      trace('workloads.states'),
      tap((states) => {
        current.update(states);
        toServer$.next({ kind: 'updateWorkloadState', states });
      }),
    );
    const ci = deps.controlInterfaces;
    const requests$ = (ci?.requests$ ?? EMPTY).pipe(trace('control-interface.requests'), tap((request) => toServer$.next({ kind: 'request', request })));
    const responses$ = fromServer$.pipe(
      filter((m) => m.kind === 'response'),
      map((m) => m.response),
      trace('control-interface.responses'),
      tap((response) => ci?.deliver(response)),
    );
    // Sent only while connected: the link drops what comes while no connection is up.
    const load$ = (deps.loadStatus$ ?? EMPTY).pipe(tap((l) => toServer$.next({ kind: 'agentLoadStatus', agentName: deps.agentName, ...l })));
    const logs$ = serveLogs(fromServer$, deps).pipe(trace('logs'), tap((m) => toServer$.next(m)));
    return merge(states$, requests$, responses$, load$, logs$).pipe(ignoreElements(), takeUntil(linkClosed$));
  });
}
