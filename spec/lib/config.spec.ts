import { expect } from 'chai';
import { ConfigError, parseConfigFile, resolveConfig } from '../../lib/config.js';
import { KUBELET_BACKOFF, nextRestart } from '../../lib/restart-policy.js';

const resolved = (toml: string) => resolveConfig({ name: 'a', insecure: true }, {}, parseConfigFile(`version = 'v1'\n${toml}`, 'test.toml'));

describe('the agent config: crash-loop back-off', () => {
  it("is kubelet's unless the config says otherwise: 10 s, doubling, at most 5 min, reset after 10 min", () => {
    expect(resolved('').crashLoopBackoff).to.deep.equal({ firstDelayMs: 10_000, maxDelayMs: 300_000, resetAfterMs: 600_000 });
    expect(resolved('').crashLoopBackoff).to.deep.equal(KUBELET_BACKOFF);
  });

  // rx~crash-loop-backoff-config~1
  it('takes first_delay, max_delay and reset_after in seconds; first_delay = 0 restarts at once, always', () => {
    const backoff = resolved('crash_loop_backoff = { first_delay = 0.5, max_delay = 30 }').crashLoopBackoff;
    expect(backoff).to.deep.equal({ firstDelayMs: 500, maxDelayMs: 30_000, resetAfterMs: 600_000 });
    const off = resolved('crash_loop_backoff = { first_delay = 0 }').crashLoopBackoff;
    expect([1, 2, 3, 10].map((n) => nextRestart(n, 1, off).delayMs)).to.deep.equal([0, 0, 0, 0]);
  });

  it('refuses other keys, negative or huge numbers and text, naming what it takes', () => {
    for (const bad of ['{ first = 1 }', '{ first_delay = -1 }', '{ max_delay = 1e9 }', "{ first_delay = '10s' }", '10']) {
      expect(() => resolved(`crash_loop_backoff = ${bad}`), bad)
        .to.throw(ConfigError)
        .with.property(
          'message',
          "The key 'crash_loop_backoff' in the agent config 'test.toml' must be a table of seconds (first_delay, max_delay, reset_after: 0 to 86400).",
        );
    }
  });
});
