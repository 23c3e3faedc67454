import { expect } from 'chai';
import { WorkloadHistogram } from '../../lib/drivers/workload-histogram.js';

describe('the per-workload histogram of the metrics endpoint (lib/drivers/workload-histogram.ts)', () => {
  it('writes cumulative buckets, +Inf, sum and count for each workload, its labels escaped, and forgets a removed one', () => {
    const h = new WorkloadHistogram('t_seconds', 'Test.', [0.01, 0.1], 'agent_"A"');
    h.observe('a', 0.005);
    h.observe('a', 0.05);
    h.observe('a', 3);
    h.observe('b\\x\ny', 0.01);
    expect(h.render().split('\n')).to.deep.equal([
      '# HELP t_seconds Test.',
      '# TYPE t_seconds histogram',
      't_seconds_bucket{le="0.01",workload="a",agent="agent_\\"A\\""} 1',
      't_seconds_bucket{le="0.1",workload="a",agent="agent_\\"A\\""} 2',
      't_seconds_bucket{le="+Inf",workload="a",agent="agent_\\"A\\""} 3',
      't_seconds_sum{workload="a",agent="agent_\\"A\\""} 3.055',
      't_seconds_count{workload="a",agent="agent_\\"A\\""} 3',
      't_seconds_bucket{le="0.01",workload="b\\\\x\\ny",agent="agent_\\"A\\""} 1',
      't_seconds_bucket{le="0.1",workload="b\\\\x\\ny",agent="agent_\\"A\\""} 1',
      't_seconds_bucket{le="+Inf",workload="b\\\\x\\ny",agent="agent_\\"A\\""} 1',
      't_seconds_sum{workload="b\\\\x\\ny",agent="agent_\\"A\\""} 0.01',
      't_seconds_count{workload="b\\\\x\\ny",agent="agent_\\"A\\""} 1',
    ]);
    h.remove('a');
    h.remove('b\\x\ny');
    expect(h.render()).to.equal('# HELP t_seconds Test.\n# TYPE t_seconds histogram');
  });
});
