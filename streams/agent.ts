// The whole agent, connected: server link in, workload core, states out.
import { Observable, Subject, defer, ignoreElements, share, takeUntil, tap } from 'rxjs';
import type { Logger } from '../lib/logger.js';
import type { ToServer } from '../lib/messages.js';
import { WorkloadStateStore } from '../lib/state-store.js';
import { type WorkloadDeps, runWorkloads } from './run-workloads.js';
import { type Connect, serverLink } from './server-link.js';
import { type Trace, noTrace } from './trace.js';

export interface AgentDeps extends WorkloadDeps {
  readonly connect: Connect;
  readonly log: Logger;
  /** Emits once when the agent shall stop: it says Goodbye and completes, leaving the workloads running. */
  readonly stop$: Observable<unknown>;
  readonly trace?: Trace;
}

/**
 * swdd~agent-shall-use-interfaces-to-server~1: runs until stopped; errors only when the server refuses
 * the agent (ServerRefused).
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
    const fromServer$ = serverLink(deps.connect, toServer$.pipe(trace('server.out')), { ...deps, greeting }).pipe(
      trace('server.in'),
      tap({ complete: () => linkClosed$.next() }),
      share(),
    );
    return runWorkloads(fromServer$, deps).pipe(
      trace('workloads.states'),
      tap((states) => {
        current.update(states);
        toServer$.next({ kind: 'updateWorkloadState', states });
      }),
      ignoreElements(),
      takeUntil(linkClosed$),
    );
  });
}
