import { expect } from 'chai';
import { ExecutionState } from '../../lib/execution-state.js';
import { parseManifest, specsFor } from '../../lib/manifest.js';
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
      { workload: 'alpha', agent: 'agent_A', runtime: 'podman', state: 'Failed(ExecFailed)', info: "Exit code: '3'" },
      { workload: 'elsewhere', agent: 'agent_B', runtime: 'podman', state: 'NotScheduled', info: "for agent 'agent_B', not this one" },
      { workload: 'unscheduled', agent: '', runtime: 'podman-kube', state: 'NotScheduled', info: '' },
      { workload: 'zeta', agent: 'agent_A', runtime: 'podman', state: 'Pending(Initial)', info: '' },
    ]);
  });

  it('lays the rows out as a table like `ank get workloads`', () => {
    const table = formatTable(statusRows('agent_A', desired, new Map())).split('\n');
    expect(table[0]).to.match(/^WORKLOAD NAME\s+AGENT\s+RUNTIME\s+EXECUTION STATE\s+ADDITIONAL INFO$/);
    expect(table[1]).to.match(/^alpha\s+agent_A\s+podman\s+Pending\(Initial\)$/);
    expect(table).to.have.length(5);
  });
});
