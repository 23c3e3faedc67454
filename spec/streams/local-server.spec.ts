import { expect } from 'chai';
import { NEVER, map } from 'rxjs';
import { ExecutionState } from '../../lib/execution-state.js';
import { silentLogger } from '../../lib/logger.js';
import { parseManifest } from '../../lib/manifest.js';
import type { FromServer } from '../../lib/messages.js';
import { localServer } from '../../streams/local-server.js';
import { testScheduler } from '../helpers/virtual-time.js';

const manifest = (config: string, extra = '') => parseManifest(`apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: ${config}"
  app:
    runtime: podman
    agent: agent_A
    dependencies: {db: ADD_COND_RUNNING}
    runtimeConfig: "image: app"
${extra}`);

const summary = (m: FromServer) => {
  if (m.kind === 'serverHello') return `hello ${m.added.map((s) => s.instanceName.workloadName).join(',')}`;
  if (m.kind === 'updateWorkload') {
    return `update +${m.added.map((s) => s.instanceName.workloadName).join(',')} -${m.deleted.map((d) => `${d.instanceName.workloadName}${JSON.stringify(d.dependencies)}`).join(',')}`;
  }
  return m.kind;
};

describe('the local server of standalone mode', () => {
  it('sends ServerHello for the first manifest and UpdateWorkload diffs (with implicit delete conditions) for the next ones', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const v1 = manifest('db:1');
      const v2 = manifest('db:2');
      const v3 = manifest('db:2', '  other:\n    runtime: podman\n    agent: agent_B\n');
      const out$ = localServer(cold('a-b-c-d', { a: v1, b: v1, c: v2, d: v3 }), NEVER, { agentName: 'agent_A', log: silentLogger });
      expectObservable(out$.pipe(map(summary))).toBe('a---c', {
        a: 'hello db,app',
        c: 'update +db -db{"app":"NotPendingNorRunning"}',
      });
    });
  });

  it('keeps the latest state of each of the agent\'s workload instances for the status view', () => {
    testScheduler().run(({ cold, flush }) => {
      const v1 = manifest('db:1');
      const seen: number[] = [];
      const db = { workloadName: 'db', agentName: 'agent_A', id: 'x' };
      localServer(cold('a', { a: v1 }), cold('-s-r', {
        s: { kind: 'updateWorkloadState', states: [{ instanceName: db, executionState: ExecutionState.running() }] },
        r: { kind: 'updateWorkloadState', states: [{ instanceName: db, executionState: ExecutionState.removed() }] },
      }), { agentName: 'agent_A', log: silentLogger, onSnapshot: (s) => seen.push(s.states.size) }).subscribe();
      flush();
      expect(seen).to.deep.equal([0, 1, 0]);
    });
  });
});
