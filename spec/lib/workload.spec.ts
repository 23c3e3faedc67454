import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { instanceKey, needsControlInterface, parseInstanceKey } from '../../lib/workload.js';
import { workload } from '../../scripts/harness/fixtures.js';

describe('workload instance names', () => {
  // swdd~api-workload-execution-instance-naming~1, swdd~api-workload-state-identification~1
  it('<workload name>.<SHA-256 of the runtime config>.<agent name>', () => {
    const w = workload('nginx', { config: 'image: nginx' });
    const hash = createHash('sha256').update('image: nginx').digest('hex');
    expect(instanceKey(w.instanceName)).to.equal(`nginx.${hash}.agent_A`);
    expect(parseInstanceKey(`nginx.${hash}.agent_A`)).to.deep.equal(w.instanceName);
    expect(parseInstanceKey('not-an-instance')).to.equal(undefined);
  });

  // swdd~api-workload-needs-control-interface~1
  it('a workload needs a Control Interface when it has at least one allow rule', () => {
    const w = workload('w');
    expect(needsControlInterface(w)).to.equal(false);
    expect(needsControlInterface({ ...w, controlInterfaceAccess: { allowRules: [], denyRules: [{ kind: 'log', workloadNames: ['*'] }] } })).to.equal(false);
    expect(
      needsControlInterface({
        ...w,
        controlInterfaceAccess: { allowRules: [{ kind: 'state', operation: 'Read', filterMasks: ['desiredState'] }], denyRules: [] },
      }),
    ).to.equal(true);
  });
});
