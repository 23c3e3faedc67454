// Health checks of podman workloads (this agent's own, beyond the released agent): the health flags of a
// workload's commandOptions, the rule that turns check results into a health status, and what its execution
// state is while its container runs. The agent runs the checks itself (`podman exec`, with its own deadline)
// and keeps the status as Podman would: Podman 4.3's own `healthcheck run` waits for a hanging check for ever,
// and its timers need systemd, which many hosts do not run.
import { ExecutionState, type HealthStatus, is } from '../../execution-state.js';
import type { WorkloadSpec } from '../../workload.js';
import { RuntimeConfigError } from '../base/run-config.js';
import { parseContainerConfig } from '../containers/run-config.js';
import { parseKubeConfig, probedContainers } from './kube-config.js';

export interface HealthCheck {
  /** The command, as the workload gave it (for the messages). */
  readonly command: string;
  /** What runs in the container: `/bin/sh -c <command>` (Podman's CMD-SHELL) or the words of a CMD. */
  readonly argv: readonly string[];
  readonly intervalMs: number;
  /** How long one check may take (Podman's --health-timeout): a check still running then has failed. */
  readonly timeoutMs: number;
  /** How many failed checks in a row make the container unhealthy. */
  readonly retries: number;
  /** Failures in this time after the container started do not count. */
  readonly startPeriodMs: number;
}

/** What the last checks left: the status (as a state carries it), and the output of the check that made it unhealthy. */
export type Health = { readonly status: Exclude<HealthStatus, 'unhealthy'> } | { readonly status: 'unhealthy'; readonly output: string };

/** One check's result; `sinceStartMs`: when it ended, counted from the container's start. */
export interface CheckResult {
  readonly passed: boolean;
  readonly output: string;
  readonly sinceStartMs: number;
}

/** The status and the failures in a row that led to it. */
export interface HealthCount {
  readonly health: Health;
  readonly failingStreak: number;
}

export const NO_CHECK_YET: HealthCount = { health: { status: 'starting' }, failingStreak: 0 };

/** Podman's defaults. */
const DEFAULT_INTERVAL_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_RETRIES = 3;
/** No check more often than this, whatever the workload says. */
const MIN_INTERVAL_MS = 100;
/** No interval or timeout longer than a day: a timer cannot wait much longer (Node's limit is 24.8 days), and a check needs no more. */
export const MAX_DURATION_MS = 86_400_000;
/** How much of a check's output a state carries. */
export const MAX_OUTPUT_CHARS = 512;
const bounded = (text: string) => (text.length > MAX_OUTPUT_CHARS ? `${text.slice(0, MAX_OUTPUT_CHARS)}…` : text);
const oneLine = (text: string) => bounded(text.replace(/\s+/g, ' ').trim());

/**
 * Podman's rule for a check's result (as `podman healthcheck run` keeps it): a pass is healthy and ends the
 * streak; a failure inside the start period counts for nothing, after it `retries` in a row make the container
 * unhealthy, with that check's output. Unhealthy is final: the container is stopped and checked no more.
 */
export function nextHealth(count: HealthCount, result: CheckResult, check: HealthCheck): HealthCount {
  if (count.health.status === 'unhealthy') return count;
  if (result.passed) return { health: { status: 'healthy' }, failingStreak: 0 };
  if (result.sinceStartMs < check.startPeriodMs) return count;
  const failingStreak = count.failingStreak + 1;
  return failingStreak >= check.retries ? { health: { status: 'unhealthy', output: oneLine(result.output) }, failingStreak } : { ...count, failingStreak };
}

/** What a check that outlived its timeout says. */
export const timedOut = (check: HealthCheck) => `The check did not finish within its timeout of ${check.timeoutMs / 1000} s.`;

/** The value of a flag given as `--flag value` or `--flag=value` (the last one wins, as with Podman). */
function flagValue(options: readonly string[], flag: string): string | undefined {
  let value: string | undefined;
  options.forEach((option, i) => {
    if (option === flag && i + 1 < options.length) value = options[i + 1];
    else if (option.startsWith(`${flag}=`)) value = option.slice(flag.length + 1);
  });
  return value;
}

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, μs: 1e-3, ns: 1e-6 };
const GO_DURATION = /^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:h|ms|m|s|us|µs|μs|ns))+$/;

/** A duration in Go's grammar, as Podman reads it (`1m30s`, `.5s`, `5.s`, `-1s`, `0`); undefined when it is none. */
export function durationMs(text: string): number | undefined {
  if (text === '0' || text === '+0' || text === '-0') return 0;
  if (!GO_DURATION.test(text)) return undefined;
  const sign = text.startsWith('-') ? -1 : 1;
  let sum = 0;
  for (const [, number, unit] of text.matchAll(/(\d+\.?\d*|\.\d+)(h|ms|m|s|us|µs|μs|ns)/g)) sum += Number(number) * UNIT_MS[unit];
  return sign * sum;
}

/** A duration flag's value in ms (its default when not given); a value Podman would refuse is refused, naming the flag. */
function durationFlag(options: readonly string[], flag: string, fallback: number): number {
  const given = flagValue(options, flag);
  if (given === undefined) return fallback;
  const ms = durationMs(given);
  if (ms === undefined) throw new RuntimeConfigError(`The health check option ${flag} '${given}' is not a duration (such as 30s, 1m30s or .5s).`);
  return ms;
}

/** The words Podman runs for a health command: a JSON list starting with CMD or CMD-SHELL as given, anything else under a shell. */
function commandWords(command: string): string[] {
  if (command.startsWith('[')) {
    try {
      const words: unknown = JSON.parse(command);
      if (Array.isArray(words) && words.length > 1 && words.every((w) => typeof w === 'string') && ['CMD', 'CMD-SHELL'].includes(words[0])) return words;
    } catch {
      // Not a list: the command as written, under a shell.
    }
  }
  return ['CMD-SHELL', command];
}

/** `CMD-SHELL x y` runs `/bin/sh -c 'x y'`, `CMD x y` runs `x y`, as Podman runs them. */
function argvOf(words: readonly string[]): string[] {
  return words[0] === 'CMD-SHELL' ? ['/bin/sh', '-c', words.slice(1).join(' ')] : words.slice(1);
}

const clamp = (ms: number, min = 0) => Math.min(Math.max(ms, min), MAX_DURATION_MS);

/**
 * The health check a podman workload's commandOptions ask for, if any (`--health-cmd none`, `--no-healthcheck`
 * and an interval of `disable` or 0 ask for none). Values Podman refuses (a duration that is none, a timeout
 * of 0, a negative start period, retries below 1) are refused with the flag named; interval and timeout are
 * kept within [100 ms, a day] and [0, a day].
 */
export function healthCheckOf(commandOptions: readonly string[]): HealthCheck | undefined {
  const command = flagValue(commandOptions, '--health-cmd');
  if (command === undefined || command === '' || command === 'none' || commandOptions.includes('--no-healthcheck')) return undefined;
  const words = commandWords(command);
  if (flagValue(commandOptions, '--health-interval') === 'disable') return undefined;
  const intervalMs = durationFlag(commandOptions, '--health-interval', DEFAULT_INTERVAL_MS);
  if (intervalMs <= 0) return undefined;
  const timeoutMs = durationFlag(commandOptions, '--health-timeout', DEFAULT_TIMEOUT_MS);
  if (timeoutMs <= 0) throw new RuntimeConfigError(`The health check option --health-timeout must be more than 0.`);
  const startPeriodMs = durationFlag(commandOptions, '--health-start-period', 0);
  if (startPeriodMs < 0) throw new RuntimeConfigError(`The health check option --health-start-period must be 0 or more.`);
  const retriesGiven = flagValue(commandOptions, '--health-retries');
  const retries = retriesGiven === undefined ? DEFAULT_RETRIES : /^\+?\d{1,9}$/.test(retriesGiven) ? Number(retriesGiven) : 0;
  if (retries < 1) throw new RuntimeConfigError(`The health check option --health-retries '${retriesGiven}' must be a whole number above 0.`);
  return {
    command: bounded(words.slice(1).join(' ')),
    argv: argvOf(words),
    intervalMs: clamp(intervalMs, MIN_INTERVAL_MS),
    timeoutMs: clamp(timeoutMs),
    retries,
    startPeriodMs,
  };
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
  return { status: 'unhealthy', output: oneLine(typeof last === 'string' ? last : '') };
}

/**
 * The health check Podman made of a container's config (`podman inspect --format '{{json .Config.Healthcheck}}'`;
 * `podman kube play` makes one of a livenessProbe), if it has one: its command, interval, timeout, retries and
 * start period (nanoseconds there; Podman's defaults where zero), kept within the same bounds.
 */
export function healthCheckOfConfig(json: string): HealthCheck | undefined {
  let parsed: { Test?: unknown; Interval?: unknown; Timeout?: unknown; Retries?: unknown; StartPeriod?: unknown } | null;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  const test = Array.isArray(parsed?.Test) ? parsed.Test.filter((word): word is string => typeof word === 'string') : [];
  if (test.length < 2 || !['CMD-SHELL', 'CMD'].includes(test[0])) return undefined;
  const ms = (ns: unknown, fallback: number) => (typeof ns === 'number' && ns > 0 ? ns / 1e6 : fallback);
  const retries = parsed?.Retries;
  return {
    command: bounded(test.slice(1).join(' ')),
    argv: argvOf(test),
    intervalMs: clamp(ms(parsed?.Interval, DEFAULT_INTERVAL_MS), MIN_INTERVAL_MS),
    timeoutMs: clamp(ms(parsed?.Timeout, DEFAULT_TIMEOUT_MS)),
    retries: typeof retries === 'number' && Number.isInteger(retries) && retries > 0 ? retries : DEFAULT_RETRIES,
    startPeriodMs: ms(parsed?.StartPeriod, 0),
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

export const waitingForHealth = (check: HealthCheck): ExecutionState => ({
  ...ExecutionState.starting(`Waiting for its health check to pass ('${check.command}').`),
  health: 'starting',
});
export const unhealthy = (check: HealthCheck, output: string): ExecutionState => ({
  ...ExecutionState.failed(`Health check '${check.command}' failed${output ? `: ${output}` : '.'}`),
  health: 'unhealthy',
});

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
  return health?.status === 'healthy' ? { ...container, health: 'healthy' } : waitingForHealth(check);
}

/** Whether the agent runs health checks for this workload: a podman workload's health flags, a kube manifest's livenessProbe. */
export function asksForHealthCheck(spec: WorkloadSpec): boolean {
  try {
    if (spec.runtime === 'podman') return healthCheckOf(parseContainerConfig(spec.runtimeConfig).commandOptions) !== undefined;
    return spec.runtime === 'podman-kube' && probedContainers(parseKubeConfig(spec.runtimeConfig).manifest) > 0;
  } catch {
    return false;
  }
}
