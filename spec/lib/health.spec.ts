import { expect } from 'chai';
import { ExecutionState, formatState } from '../../lib/execution-state.js';
import {
  type HealthCheck,
  MAX_OUTPUT_CHARS,
  combinedHealth,
  durationMs,
  healthCheckOf,
  healthCheckOfConfig,
  healthOfInspect,
  healthState,
  namedChecks,
  withAgentChecks,
} from '../../lib/podman/health.js';

const check: HealthCheck = { command: 'cat /tmp/ok', intervalMs: 1000, timeoutMs: 30_000 };

describe('health checks of podman workloads (lib/podman/health.ts)', () => {
  // rx~health-runs-checks-on-interval~1
  it("reads Podman's health flags from commandOptions, in both spellings, with Podman's defaults", () => {
    expect(healthCheckOf(['--health-cmd', 'cat /tmp/ok', '--health-interval', '2s', '--health-timeout=500ms'])).to.deep.equal({
      command: 'cat /tmp/ok',
      intervalMs: 2000,
      timeoutMs: 500,
    });
    expect(healthCheckOf(['--health-cmd=true'])).to.deep.equal({ command: 'true', intervalMs: 30_000, timeoutMs: 30_000 });
    expect(healthCheckOf(['--health-cmd', 'true', '--health-interval', '1m30s'])?.intervalMs).to.equal(90_000);
    expect(healthCheckOf(['--health-cmd', 'true', '--health-interval', '1ms'])?.intervalMs, 'at least 100 ms').to.equal(100);
  });

  it('asks for no check without --health-cmd, with `none`, --no-healthcheck, or an interval of `disable`', () => {
    for (const options of [
      [],
      ['--health-cmd', 'none'],
      ['--health-cmd', 'true', '--no-healthcheck'],
      ['--health-cmd', 'true', '--health-interval', 'disable'],
    ])
      expect(healthCheckOf(options), options.join(' ')).to.equal(undefined);
  });

  it('reads Go durations and nothing else', () => {
    expect([durationMs('2s'), durationMs('1h2m3s'), durationMs('1.5s'), durationMs('250ms')]).to.deep.equal([2000, 3_723_000, 1500, 250]);
    expect([durationMs(''), durationMs('2'), durationMs('s'), durationMs('2x'), durationMs('-1s')]).to.deep.equal([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
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
    const shown = (container: ExecutionState, health: Parameters<typeof healthState>[1], failedWith?: string) =>
      formatState(healthState(container, health, failedWith, check));
    expect(shown(running, undefined)).to.equal("Pending(Starting): Waiting for its health check to pass ('cat /tmp/ok').");
    expect(shown(running, { status: 'starting' })).to.equal("Pending(Starting): Waiting for its health check to pass ('cat /tmp/ok').");
    expect(shown(running, { status: 'healthy' })).to.equal('Running(Ok)');
    expect(shown(running, { status: 'unhealthy', output: 'no file' }, 'no file')).to.equal("Failed(ExecFailed): Health check 'cat /tmp/ok' failed: no file");
    expect(shown(exited, undefined, 'no file'), 'stopped after it').to.equal("Failed(ExecFailed): Health check 'cat /tmp/ok' failed: no file");
    expect(shown(exited, undefined), 'an exit of its own').to.equal("Failed(ExecFailed): Exit code: '137'");
    expect(shown(ExecutionState.succeeded(), undefined)).to.equal('Succeeded(Ok)');
    expect(shown(running, { status: 'unhealthy', output: '' }, '')).to.equal("Failed(ExecFailed): Health check 'cat /tmp/ok' failed.");
  });

  // rx~health-kube-liveness-probes~1
  it("reads the health check Podman made of a kube container's livenessProbe, with Podman's defaults; none when there is none", () => {
    const made = '{"Test":["CMD-SHELL","cat","/tmp/ok","||","exit","1"],"StartPeriod":1000000000,"Interval":2000000000,"Timeout":3000000000,"Retries":2}';
    expect(healthCheckOfConfig(made)).to.deep.equal({ command: 'cat /tmp/ok || exit 1', intervalMs: 2000, timeoutMs: 3000 });
    expect(healthCheckOfConfig('{"Test":["CMD","true"]}')).to.deep.equal({ command: 'true', intervalMs: 30_000, timeoutMs: 30_000 });
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
    const one = { name: 'pod-app', check: { command: 'cat /tmp/ok || exit 1', intervalMs: 1000, timeoutMs: 3000 } };
    expect(namedChecks([one, { name: 'pod-web', check: { ...check, command: 'true' } }])).to.deep.equal({
      command: 'pod-app: cat /tmp/ok || exit 1; pod-web: true',
      intervalMs: 1000,
      timeoutMs: 3000,
    });
    const many = Array.from({ length: 100 }, (_, i) => ({ name: `pod-c${i}`, check: { ...check, command: 'x'.repeat(500) } }));
    expect(namedChecks(many).command).to.have.length(MAX_OUTPUT_CHARS + 1);
  });
});
