import { expect } from 'chai';
import { ExecutionState } from '../../lib/execution-state.js';
import { parseManifest } from '../../lib/codec/manifest.js';
import { specsFor } from '../../lib/desired-state.js';
import { formatTable, statusRows } from '../../lib/status.js';
import { instanceKey } from '../../lib/workload.js';

const desired = parseManifest(`apiVersion: v1
workloads:
  zeta: {runtime: podman, agent: agent_A, runtimeConfig: "image: z"}
  alpha: {runtime: podman, agent: agent_A, runtimeConfig: "image: a"}
  elsewhere: {runtime: podman, agent: agent_B}
  unscheduled: {runtime: podman-kube, agent: ""}
`);

describe('the status view of standalone mode', () => {
  // swdd~api-object-serialization~1
  it('one row per workload, sorted by name, with not-scheduled ones said so', () => {
    const alpha = specsFor('agent_A', desired).find((s) => s.instanceName.workloadName === 'alpha')!;
    const states = new Map([[instanceKey(alpha.instanceName), { instanceName: alpha.instanceName, executionState: ExecutionState.failed("Exit code: '3'") }]]);
    expect(statusRows('agent_A', desired, states)).to.deep.equal([
      { workload: 'alpha', agent: 'agent_A', runtime: 'podman', state: 'Failed(ExecFailed)', health: '', info: "Exit code: '3'" },
      { workload: 'elsewhere', agent: 'agent_B', runtime: 'podman', state: 'NotScheduled', health: '', info: "for agent 'agent_B', not this one" },
      { workload: 'unscheduled', agent: '', runtime: 'podman-kube', state: 'NotScheduled', health: '', info: '' },
      { workload: 'zeta', agent: 'agent_A', runtime: 'podman', state: 'Pending(Initial)', health: '', info: '' },
    ]);
  });

  it('lays the rows out as a table like `ank get workloads`', () => {
    const table = formatTable(statusRows('agent_A', desired, new Map())).split('\n');
    expect(table[0]).to.match(/^WORKLOAD NAME\s+AGENT\s+RUNTIME\s+EXECUTION STATE\s+ADDITIONAL INFO$/);
    expect(table[1]).to.match(/^alpha\s+agent_A\s+podman\s+Pending\(Initial\)$/);
    expect(table).to.have.length(5);
  });

  // rx~health-starting-until-healthy~1, rx~health-running-when-healthy~1, rx~health-unhealthy-fails-and-stops~1
  it('shows a HEALTH column for workloads the agent checks: starting, healthy, unhealthy', () => {
    const checked = parseManifest(`apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: z
      commandOptions: ["--health-cmd", "cat /tmp/ok", "--health-interval", "1s"]
  pod:
    runtime: podman-kube
    agent: agent_A
    runtimeConfig: |
      manifest: |
        kind: Pod
        spec:
          containers:
          - name: app
            livenessProbe: {exec: {command: ["true"]}}
  plain: {runtime: podman, agent: agent_A, runtimeConfig: "image: a"}
`);
    const specs = specsFor('agent_A', checked);
    const at = (name: string, executionState: ExecutionState) => {
      const { instanceName } = specs.find((s) => s.instanceName.workloadName === name)!;
      return [instanceKey(instanceName), { instanceName, executionState }] as const;
    };
    const states = (db: ExecutionState, pod: ExecutionState) => new Map([at('db', db), at('pod', pod), at('plain', ExecutionState.running())]);
    const health = (rows: ReturnType<typeof statusRows>) => rows.map((r) => `${r.workload}:${r.health}`);
    // The health checks' states carry their health beside the text; the view reads that, never the text.
    const waiting: ExecutionState = { ...ExecutionState.starting("Waiting for its health check to pass ('cat /tmp/ok')."), health: 'starting' };
    const healthy: ExecutionState = { ...ExecutionState.running(), health: 'healthy' };
    expect(health(statusRows('agent_A', checked, states(waiting, healthy)))).to.deep.equal(['db:starting', 'plain:', 'pod:healthy']);
    const failed: ExecutionState = { ...ExecutionState.failed("Health check 'cat /tmp/ok' failed: gone"), health: 'unhealthy' };
    expect(health(statusRows('agent_A', checked, states(failed, ExecutionState.succeeded())))).to.deep.equal(['db:unhealthy', 'plain:', 'pod:']);
    const table = formatTable(statusRows('agent_A', checked, states(waiting, healthy))).split('\n');
    expect(table[0]).to.match(/^WORKLOAD NAME\s+AGENT\s+RUNTIME\s+EXECUTION STATE\s+HEALTH\s+ADDITIONAL INFO$/);
    expect(table[1]).to.match(/^db\s+agent_A\s+podman\s+Pending\(Starting\)\s+starting\s+Waiting for its health check/);
  });
});
