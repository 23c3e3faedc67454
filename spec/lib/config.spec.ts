import { expect } from 'chai';
import { ConfigError, parseConfigFile, resolveConfig } from '../../lib/config.js';
import { RUNTIME_SETTINGS } from '../../bin/settings.js';
import { KUBELET_BACKOFF, nextRestart } from '../../lib/restart-policy.js';

const resolved = (toml: string, env: Record<string, string> = {}) =>
  resolveConfig(
    { name: 'a', insecure: true },
    env,
    parseConfigFile(`version = 'v1'\n${toml}`, 'test.toml', undefined, RUNTIME_SETTINGS),
    undefined,
    RUNTIME_SETTINGS,
  );
/** What the config gives a runtime module, by its first runtime's name. */
const moduleOf = (config: { moduleSettings: ReadonlyMap<string, unknown> }, module: string) => config.moduleSettings.get(module) as Record<string, unknown>;

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

describe('the agent config: containerd and pull_ahead', () => {
  // rx~containerd-scope~1
  it('containerd = { namespace, address } becomes nerdctl general options for every containerd workload; other keys are refused', () => {
    expect(moduleOf(resolved(`containerd = { namespace = 'cars', address = '/run/k3s/containerd.sock' }`), 'containerd').scope).to.deep.equal([
      '--namespace',
      'cars',
      '--address',
      '/run/k3s/containerd.sock',
    ]);
    expect(moduleOf(resolved(''), 'containerd').scope).to.deep.equal([]);
    for (const bad of ["{ snapshotter = 'zfs' }", '{ namespace = 1 }', "'cars'"]) {
      expect(() => resolved(`containerd = ${bad}`), bad).to.throw(
        ConfigError,
        "The key 'containerd' in the agent config 'test.toml' must be a table of namespace and address (strings).",
      );
    }
  });

  // rx~pull-ahead~1
  it('pulls ahead unless pull_ahead = false', () => {
    expect(resolved('').pullAhead).to.equal(true);
    expect(resolved('pull_ahead = false').pullAhead).to.equal(false);
  });

  // rx~podman-service-fallback~1
  it('asks Podman through its service unless podman_service = false', () => {
    expect(moduleOf(resolved(''), 'podman').service).to.equal(true);
    expect(moduleOf(resolved('podman_service = false'), 'podman').service).to.equal(false);
    expect(() => resolved("podman_service = 'no'")).to.throw(ConfigError, "The key 'podman_service' in the agent config 'test.toml' must be a boolean.");
  });

  // rx~image-gc~1
  it("collects the agent's images by kubelet's rule unless image_gc says otherwise; image_gc = false never", () => {
    expect(resolved('').imageGc).to.deep.equal({ high: 85, low: 80, minAgeMs: 120_000 });
    expect(resolved('image_gc = { high = 90, min_age = 30 }').imageGc).to.deep.equal({ high: 90, low: 80, minAgeMs: 30_000 });
    expect(resolved('image_gc = false').imageGc).to.equal(undefined);
    expect(() => resolved('image_gc = { high = 70, low = 75 }')).to.throw(ConfigError, 'image_gc.low (75 %) is above image_gc.high (70 %).');
    for (const bad of ['{ high = 101 }', '{ size = 3 }', "{ min_age = '2m' }", 'true', '{ low = -1 }']) {
      expect(() => resolved(`image_gc = ${bad}`), bad).to.throw(
        ConfigError,
        "The key 'image_gc' in the agent config 'test.toml' must be a table of high, low (percent) and min_age (seconds), or false.",
      );
    }
  });

  // rx~max-concurrent-creates~1
  it('runs 4 creates at once per engine unless ANKAIOS_<ENGINE>_MAX_CONCURRENT_CREATES says a whole number from 1', () => {
    const withEnv = (env: Record<string, string>) => {
      const config = resolved('', env);
      return { podman: moduleOf(config, 'podman').maxCreates, containerd: moduleOf(config, 'containerd').maxCreates };
    };
    expect(withEnv({})).to.deep.equal({ podman: 4, containerd: 4 });
    expect(withEnv({ ANKAIOS_PODMAN_MAX_CONCURRENT_CREATES: '1', ANKAIOS_CONTAINERD_MAX_CONCURRENT_CREATES: '12' })).to.deep.equal({
      podman: 1,
      containerd: 12,
    });
    for (const bad of ['0', '-1', 'four', '2.5']) {
      expect(() => withEnv({ ANKAIOS_PODMAN_MAX_CONCURRENT_CREATES: bad }), bad).to.throw(
        ConfigError,
        `ANKAIOS_PODMAN_MAX_CONCURRENT_CREATES is '${bad}': give a whole number from 1 to 9999.`,
      );
    }
  });
});
