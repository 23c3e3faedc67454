// Health checks of podman workloads (this agent's own, beyond the released agent): the health flags of a
// workload's commandOptions, and what its execution state is while its container runs. Podman keeps the
// status (retries, start period); the agent runs the checks (`podman healthcheck run`) on the interval,
// since Podman's own timers need systemd, which many hosts do not run.
import { ExecutionState, is } from '../execution-state.js';
import type { WorkloadSpec } from '../workload.js';
import { parseKubeConfig, parsePodmanConfig } from './runtime-config.js';

export interface HealthCheck {
  /** The command, as the workload gave it (for the messages). */
  readonly command: string;
  readonly intervalMs: number;
  /** How long one check may take (Podman's --health-timeout). */
  readonly timeoutMs: number;
}

/** What the last check left: Podman's status, and the output of the last check when it turned unhealthy. */
export type Health = { readonly status: 'starting' | 'healthy' } | { readonly status: 'unhealthy'; readonly output: string };

/** Podman's defaults. */
const DEFAULT_INTERVAL_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 30_000;
/** No check more often than this, whatever the workload says. */
const MIN_INTERVAL_MS = 100;
/** How much of a check's output a state carries. */
export const MAX_OUTPUT_CHARS = 512;
const bounded = (text: string) => (text.length > MAX_OUTPUT_CHARS ? `${text.slice(0, MAX_OUTPUT_CHARS)}…` : text);

/** The value of a flag given as `--flag value` or `--flag=value` (the last one wins, as with Podman). */
function flagValue(options: readonly string[], flag: string): string | undefined {
  let value: string | undefined;
  options.forEach((option, i) => {
    if (option === flag && i + 1 < options.length) value = options[i + 1];
    else if (option.startsWith(`${flag}=`)) value = option.slice(flag.length + 1);
  });
  return value;
}

/** A Go duration as Podman reads it (`1m30s`, `500ms`, `2s`); undefined when it is none. */
export function durationMs(text: string): number | undefined {
  const parts = /^(?:\d+(?:\.\d+)?(?:h|m|s|ms|us|µs|ns))+$/.test(text) ? text.match(/\d+(?:\.\d+)?(?:h|ms|m|s|us|µs|ns)/g) : null;
  if (!parts) return undefined;
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 };
  return parts.reduce((sum, part) => {
    const [, number, suffix] = /^(\d+(?:\.\d+)?)(\D+)$/.exec(part)!;
    return sum + Number(number) * unit[suffix];
  }, 0);
}

/** The health check a podman workload's commandOptions ask for, if any (`--health-cmd none` and `--no-healthcheck` ask for none). */
export function healthCheckOf(commandOptions: readonly string[]): HealthCheck | undefined {
  const command = flagValue(commandOptions, '--health-cmd');
  if (command === undefined || command === '' || command === 'none' || commandOptions.includes('--no-healthcheck')) return undefined;
  const interval = flagValue(commandOptions, '--health-interval');
  const intervalMs = interval === undefined ? DEFAULT_INTERVAL_MS : durationMs(interval);
  // `disable`: the workload asked for no timer, so nothing runs its checks (as with Podman).
  if (intervalMs === undefined || intervalMs === 0) return undefined;
  const timeout = flagValue(commandOptions, '--health-timeout');
  return { command, intervalMs: Math.max(intervalMs, MIN_INTERVAL_MS), timeoutMs: (timeout && durationMs(timeout)) || DEFAULT_TIMEOUT_MS };
}

/** The commandOptions as the agent runs them: Podman sets up no timer of its own (the agent runs the checks). */
export function withAgentChecks(commandOptions: readonly string[]): string[] {
  const without = commandOptions.filter(
    (o, i) => o !== '--health-interval' && commandOptions[i - 1] !== '--health-interval' && !o.startsWith('--health-interval='),
  );
  return [...without, '--health-interval=disable'];
}

/** Podman's `.State.Health` (from `podman inspect`) as a Health; the output of its last check, bounded, on one line. */
export function healthOfInspect(json: string): Health {
  let parsed: { Status?: unknown; Log?: Array<{ Output?: unknown }> } | null = null;
  try {
    parsed = JSON.parse(json);
  } catch {
    return { status: 'starting' };
  }
  const status = parsed?.Status;
  if (status === 'healthy') return { status: 'healthy' };
  if (status !== 'unhealthy') return { status: 'starting' };
  const last = Array.isArray(parsed?.Log) ? parsed.Log.at(-1)?.Output : undefined;
  const output = typeof last === 'string' ? last.replace(/\s+/g, ' ').trim() : '';
  return { status: 'unhealthy', output: bounded(output) };
}

/**
 * The health check Podman made of a container's config (`podman inspect --format '{{json .Config.Healthcheck}}'`;
 * `podman kube play` makes one of a livenessProbe), if it has one: its command without Podman's `CMD-SHELL`/`CMD`
 * word, its interval and timeout (nanoseconds there; Podman's defaults where zero).
 */
export function healthCheckOfConfig(json: string): HealthCheck | undefined {
  let parsed: { Test?: unknown; Interval?: unknown; Timeout?: unknown } | null;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  const test = Array.isArray(parsed?.Test) ? parsed.Test.filter((word): word is string => typeof word === 'string') : [];
  if (test.length < 2 || !['CMD-SHELL', 'CMD'].includes(test[0])) return undefined;
  const ms = (ns: unknown, fallback: number) => (typeof ns === 'number' && ns > 0 ? ns / 1e6 : fallback);
  return {
    command: bounded(test.slice(1).join(' ')),
    intervalMs: Math.max(ms(parsed?.Interval, DEFAULT_INTERVAL_MS), MIN_INTERVAL_MS),
    timeoutMs: ms(parsed?.Timeout, DEFAULT_TIMEOUT_MS),
  };
}

/**
 * The health of a workload of several checked containers, from the last health of each (undefined: none
 * yet): unhealthy as soon as one is (its output, named after its container), healthy once all are.
 */
export function combinedHealth(latest: ReadonlyArray<{ readonly name: string; readonly health?: Health }>): Health | undefined {
  const failed = latest.find((c) => c.health?.status === 'unhealthy');
  if (failed?.health?.status === 'unhealthy') return { status: 'unhealthy', output: `${failed.name}: ${failed.health.output}` };
  return latest.length > 0 && latest.every((c) => c.health?.status === 'healthy') ? { status: 'healthy' } : undefined;
}

/** Several containers' checks as one, for the states that name it: `app: cat /tmp/ok; web: …` (bounded). */
export function namedChecks(checks: ReadonlyArray<{ readonly name: string; readonly check: HealthCheck }>): HealthCheck {
  return { ...checks[0].check, command: bounded(checks.map((c) => `${c.name}: ${c.check.command}`).join('; ')) };
}

export const waitingForHealth = (check: HealthCheck) => ExecutionState.starting(`Waiting for its health check to pass ('${check.command}').`);
export const unhealthy = (check: HealthCheck, output: string) => ExecutionState.failed(`Health check '${check.command}' failed${output ? `: ${output}` : '.'}`);

/**
 * The execution state of a health-checked workload: while its container runs, Pending(Starting) until a
 * check passes, Running(Ok) while it is healthy; once unhealthy, Failed(ExecFailed) with the check's
 * output until the container runs again (the agent stops it; the restart policy decides). Otherwise the
 * container's state.
 */
export function healthState(container: ExecutionState, health: Health | undefined, failedWith: string | undefined, check: HealthCheck): ExecutionState {
  if (failedWith !== undefined && !is(container, 'Running')) return unhealthy(check, failedWith);
  if (!is(container, 'Running', 'Ok')) return container;
  if (health?.status === 'unhealthy') return unhealthy(check, health.output);
  return health?.status === 'healthy' ? container : waitingForHealth(check);
}

/** Whether the agent runs health checks for this workload: a podman workload's health flags, a kube manifest's livenessProbe. */
export function asksForHealthCheck(spec: WorkloadSpec): boolean {
  try {
    if (spec.runtime === 'podman') return healthCheckOf(parsePodmanConfig(spec.runtimeConfig).commandOptions) !== undefined;
    return spec.runtime === 'podman-kube' && parseKubeConfig(spec.runtimeConfig).manifest.includes('livenessProbe');
  } catch {
    return false;
  }
}

/** What a health-checked workload's state says of its health: `starting`, `healthy`, `unhealthy`, or '' (not running). */
export function healthShown(state: ExecutionState): string {
  if (state.additionalInfo.startsWith('Health check ')) return 'unhealthy';
  if (state.additionalInfo.startsWith('Waiting for its health check')) return 'starting';
  return is(state, 'Running', 'Ok') ? 'healthy' : '';
}
