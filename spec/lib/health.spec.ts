import { expect } from 'chai';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import {
  type HealthCheck,
  MAX_DURATION_MS,
  MAX_OUTPUT_CHARS,
  NO_CHECK_YET,
  combinedHealth,
  durationMs,
  healthCheckOf,
  healthCheckOfConfig,
  healthOfInspect,
  healthState,
  namedChecks,
  nextHealth,
  withAgentChecks,
} from '../../lib/runtimes/podman/health.js';
import { RuntimeConfigError } from '../../lib/runtimes/base/run-config.js';

const check: HealthCheck = {
  command: 'cat /tmp/ok',
  argv: ['/bin/sh', '-c', 'cat /tmp/ok'],
  intervalMs: 1000,
  timeoutMs: 30_000,
  retries: 3,
  startPeriodMs: 0,
};
const shell = (command: string) => ['/bin/sh', '-c', command];

describe('health checks of podman workloads (lib/runtimes/podman/health.ts)', () => {
  // rx~health-runs-checks-on-interval~1
  it("reads Podman's health flags from commandOptions, in both spellings, with Podman's defaults", () => {
    expect(
      healthCheckOf(['--health-cmd', 'cat /tmp/ok', '--health-interval', '2s', '--health-timeout=500ms', '--health-retries=2', '--health-start-period', '1m']),
    ).to.deep.equal({
      command: 'cat /tmp/ok',
      argv: shell('cat /tmp/ok'),
      intervalMs: 2000,
      timeoutMs: 500,
      retries: 2,
      startPeriodMs: 60_000,
    });
    expect(healthCheckOf(['--health-cmd=true'])).to.deep.equal({
      command: 'true',
      argv: shell('true'),
      intervalMs: 30_000,
      timeoutMs: 30_000,
      retries: 3,
      startPeriodMs: 0,
    });
    expect(healthCheckOf(['--health-cmd', '["CMD", "cat", "/tmp/ok"]'])?.argv, "a JSON list of Podman's CMD form runs without a shell").to.deep.equal([
      'cat',
      '/tmp/ok',
    ]);
    expect(healthCheckOf(['--health-cmd', 'true', '--health-interval', '1m30s'])?.intervalMs).to.equal(90_000);
    expect(healthCheckOf(['--health-cmd', 'true', '--health-interval', '1ms'])?.intervalMs, 'at least 100 ms').to.equal(100);
  });

  it('asks for no check without --health-cmd, with `none`, --no-healthcheck, or an interval of `disable`', () => {
    for (const options of [
      [],
      ['--health-cmd', 'none'],
      ['--health-cmd', 'true', '--no-healthcheck'],
      ['--health-cmd', 'true', '--health-interval', 'disable'],
      ['--health-cmd', 'true', '--health-interval', '0'],
      ['--health-cmd', 'true', '--health-interval', '-1s'],
    ])
      expect(healthCheckOf(options), options.join(' ')).to.equal(undefined);
  });

  it("reads durations in Go's grammar, as Podman does, and nothing else", () => {
    const read = ['2s', '1h2m3s', '1.5s', '250ms', '.5s', '5.s', '0', '-1s', '+2m', '1h1µs'].map(durationMs);
    expect(read).to.deep.equal([2000, 3_723_000, 1500, 250, 500, 5000, 0, -1000, 120_000, 3_600_000.001]);
    expect(['', '2', 's', '2x', '.s', '1 s', '--1s', '1s2'].map(durationMs)).to.deep.equal(Array(8).fill(undefined));
  });

  // rx~health-runs-checks-on-interval~1
  it('refuses the values Podman refuses, naming the flag, and keeps interval and timeout within a day', () => {
    const refused =
      (...options: string[]) =>
      () =>
        healthCheckOf(['--health-cmd', 'true', ...options]);
    expect(refused('--health-interval', '1x')).to.throw(RuntimeConfigError, "--health-interval '1x' is not a duration");
    expect(refused('--health-timeout', 'soon')).to.throw(RuntimeConfigError, '--health-timeout');
    expect(refused('--health-timeout', '0')).to.throw(RuntimeConfigError, '--health-timeout must be more than 0');
    expect(refused('--health-start-period', '-1s')).to.throw(RuntimeConfigError, '--health-start-period must be 0 or more');
    expect(refused('--health-retries', '0')).to.throw(RuntimeConfigError, '--health-retries');
    expect(refused('--health-retries', 'many')).to.throw(RuntimeConfigError, '--health-retries');
    const huge = healthCheckOf(['--health-cmd', 'true', '--health-interval', '600h', '--health-timeout', '600h']);
    expect([huge?.intervalMs, huge?.timeoutMs]).to.deep.equal([MAX_DURATION_MS, MAX_DURATION_MS]);
    expect(MAX_DURATION_MS, "within what Node's timers can wait").to.be.below(2 ** 31 - 1);
    expect(healthCheckOf(['--health-cmd', 'true', '--health-interval', '.5s'])?.intervalMs).to.equal(500);
  });

  // rx~health-unhealthy-fails-and-stops~1
  it("counts results by Podman's rule: a pass is healthy, `retries` failures in a row after the start period are unhealthy", () => {
    const twice: HealthCheck = { ...check, retries: 2, startPeriodMs: 5000 };
    const results = (...steps: Array<[boolean, number]>) => {
      const counts = [NO_CHECK_YET];
      for (const [passed, at] of steps) counts.push(nextHealth(counts.at(-1)!, { passed, output: `out ${at}\n`, sinceStartMs: at }, twice));
      return counts;
    };
    const statuses = (counts: ReturnType<typeof results>) => counts.slice(1).map((c) => c.health.status);
    // Failures in the start period count for nothing, however many.
    expect(statuses(results([false, 1000], [false, 2000], [false, 3000]))).to.deep.equal(['starting', 'starting', 'starting']);
    // After it, the second failure in a row is unhealthy, with that check's output on one line.
    const failing = results([false, 6000], [false, 7000]);
    expect(failing.at(-1)).to.deep.equal({ health: { status: 'unhealthy', output: 'out 7000' }, failingStreak: 2 });
    // A pass in between ends the streak; a pass in the start period is healthy at once.
    expect(statuses(results([true, 1000], [false, 6000], [true, 7000], [false, 8000], [false, 9000]))).to.deep.equal([
      'healthy',
      'healthy',
      'healthy',
      'healthy',
      'unhealthy',
    ]);
    // Unhealthy is final: a later pass changes nothing (the container is stopped).
    expect(nextHealth(failing.at(-1)!, { passed: true, output: '', sinceStartMs: 8000 }, twice).health.status).to.equal('unhealthy');
  });

  // rx~health-runs-checks-on-interval~1
  it("runs the container with Podman's timer off (the agent runs the checks), whatever interval was given", () => {
    expect(withAgentChecks(['--health-cmd', 'true', '--health-interval', '2s', '--stop-timeout', '1'])).to.deep.equal([
      '--health-cmd',
      'true',
      '--stop-timeout',
      '1',
      '--health-interval=disable',
    ]);
    expect(withAgentChecks(['--health-cmd=true', '--health-interval=5s'])).to.deep.equal(['--health-cmd=true', '--health-interval=disable']);
  });

  it("reads Podman's status and the last check's output, bounded and on one line", () => {
    expect(healthOfInspect('{"Status":"healthy","Log":[]}')).to.deep.equal({ status: 'healthy' });
    expect(healthOfInspect('{"Status":"starting"}')).to.deep.equal({ status: 'starting' });
    expect(healthOfInspect('{"Status":"unhealthy","Log":[{"Output":"old"},{"Output":"no\\nfile\\n"}]}')).to.deep.equal({
      status: 'unhealthy',
      output: 'no file',
    });
    const long = healthOfInspect(JSON.stringify({ Status: 'unhealthy', Log: [{ Output: 'x'.repeat(10_000) }] }));
    expect(long.status === 'unhealthy' && long.output.length).to.equal(MAX_OUTPUT_CHARS + 1);
    expect(healthOfInspect('not json')).to.deep.equal({ status: 'starting' });
    expect(healthOfInspect('null')).to.deep.equal({ status: 'starting' });
  });

  // rx~health-starting-until-healthy~1, rx~health-running-when-healthy~1, rx~health-unhealthy-fails-and-stops~1
  it('the state: waiting until healthy, Running(Ok) while healthy, Failed with the output once unhealthy until it runs again', () => {
    const running = ExecutionState.running();
    const exited = ExecutionState.failed("Exit code: '137'");
    // The text as the server sees it, and the health beside it that the status view and the metrics read.
    const shown = (container: ExecutionState, health: Parameters<typeof healthState>[1], failedWith?: string) => {
      const state = healthState(container, health, failedWith, check);
      return state.health ? `${formatState(state)} [${state.health}]` : formatState(state);
    };
    expect(shown(running, undefined)).to.equal("Pending(Starting): Waiting for its health check to pass ('cat /tmp/ok'). [starting]");
    expect(shown(running, { status: 'starting' })).to.equal("Pending(Starting): Waiting for its health check to pass ('cat /tmp/ok'). [starting]");
    expect(shown(running, { status: 'healthy' })).to.equal('Running(Ok) [healthy]');
    expect(shown(running, { status: 'unhealthy', output: 'no file' }, 'no file')).to.equal(
      "Failed(ExecFailed): Health check 'cat /tmp/ok' failed: no file [unhealthy]",
    );
    expect(shown(exited, undefined, 'no file'), 'stopped after it').to.equal("Failed(ExecFailed): Health check 'cat /tmp/ok' failed: no file [unhealthy]");
    expect(shown(exited, undefined), 'an exit of its own').to.equal("Failed(ExecFailed): Exit code: '137'");
    expect(shown(ExecutionState.succeeded(), undefined)).to.equal('Succeeded(Ok)');
    expect(shown(running, { status: 'unhealthy', output: '' }, '')).to.equal("Failed(ExecFailed): Health check 'cat /tmp/ok' failed. [unhealthy]");
  });

  // rx~health-kube-liveness-probes~1
  it("reads the health check Podman made of a kube container's livenessProbe, with Podman's defaults; none when there is none", () => {
    const made = '{"Test":["CMD-SHELL","cat","/tmp/ok","||","exit","1"],"StartPeriod":1000000000,"Interval":2000000000,"Timeout":3000000000,"Retries":2}';
    expect(healthCheckOfConfig(made)).to.deep.equal({
      command: 'cat /tmp/ok || exit 1',
      argv: shell('cat /tmp/ok || exit 1'),
      intervalMs: 2000,
      timeoutMs: 3000,
      retries: 2,
      startPeriodMs: 1000,
    });
    expect(healthCheckOfConfig('{"Test":["CMD","true"]}')).to.deep.equal({
      command: 'true',
      argv: ['true'],
      intervalMs: 30_000,
      timeoutMs: 30_000,
      retries: 3,
      startPeriodMs: 0,
    });
    expect(healthCheckOfConfig('{"Test":["CMD","true"],"Interval":2160000000000000}')?.intervalMs, 'at most a day').to.equal(MAX_DURATION_MS);
    for (const none of ['null', '{"Test":["NONE"]}', '{"Test":[]}', 'not json', '{"Test":"CMD-SHELL true"}'])
      expect(healthCheckOfConfig(none), none).to.equal(undefined);
    expect(healthCheckOfConfig('{"Test":["CMD","true"],"Interval":1}')?.intervalMs, 'never more often than every 100 ms').to.equal(100);
  });

  // rx~health-kube-liveness-probes~1
  it('a workload of several checked containers is healthy once all are, and unhealthy as soon as one is, naming it', () => {
    expect(combinedHealth([{ name: 'a', health: { status: 'healthy' } }, { name: 'b' }])).to.equal(undefined);
    expect(
      combinedHealth([
        { name: 'a', health: { status: 'healthy' } },
        { name: 'b', health: { status: 'starting' } },
      ]),
    ).to.equal(undefined);
    expect(
      combinedHealth([
        { name: 'a', health: { status: 'healthy' } },
        { name: 'b', health: { status: 'healthy' } },
      ]),
    ).to.deep.equal({ status: 'healthy' });
    expect(
      combinedHealth([
        { name: 'a', health: { status: 'healthy' } },
        { name: 'b', health: { status: 'unhealthy', output: 'gone' } },
      ]),
    ).to.deep.equal({
      status: 'unhealthy',
      output: 'b: gone',
    });
    expect(combinedHealth([])).to.equal(undefined);
  });

  // rx~health-kube-liveness-probes~1
  it("names several containers' checks in one bounded text, for the states", () => {
    const one = { name: 'pod-app', check: { ...check, command: 'cat /tmp/ok || exit 1' } };
    expect(namedChecks([one, { name: 'pod-web', check: { ...check, command: 'true' } }]).command).to.equal('pod-app: cat /tmp/ok || exit 1; pod-web: true');
    const many = Array.from({ length: 100 }, (_, i) => ({ name: `pod-c${i}`, check: { ...check, command: 'x'.repeat(500) } }));
    expect(namedChecks(many).command).to.have.length(MAX_OUTPUT_CHARS + 1);
  });
});
