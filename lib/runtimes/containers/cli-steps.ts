// What the runtimes on a container CLI (Podman, nerdctl) share: a step run for its effect only, a step that
// counts "already gone" as done, the workloads found by their labels, the arguments of `logs`.
import type { Container } from '../../ports.js';
import { EMPTY, type Observable, catchError, ignoreElements, throwError } from 'rxjs';
import type { ExecutionState } from '../../execution-state.js';
import type { LogsOptions } from '../../messages.js';
import type { ExistingWorkload } from '../../runtime-connector.js';
import { parseInstanceKey } from '../../workload.js';
import { CliError, NotFound } from '../base/cli.js';

/** A container or volume that is not there: a client's NotFound, or what Podman's and nerdctl's CLIs say of it. */
const missing = (err: unknown) =>
  err instanceof NotFound || (err instanceof CliError && /no such (container|volume)|no container with name or id/i.test(err.message));
/** Runs `step` for its effect only, whatever becomes of it (clean-up after a failure). */
export const quietly = (step: Observable<unknown>): Observable<never> =>
  step.pipe(
    ignoreElements(),
    catchError(() => EMPTY),
  );

/** Runs `step`, counting "it is already gone" as done (neither CLI has a flag for it on every command). */
export const tolerateMissing = (step: Observable<unknown>) =>
  step.pipe(
    ignoreElements(),
    catchError((err: unknown) => (missing(err) ? EMPTY : throwError(() => err))),
  );

/** The workloads of `agentName` among containers found by their `agent` label: those whose `name` label is an instance of it. */
export function labelledWorkloads(
  containers: readonly Container[],
  agentName: string,
  runtime: string,
  stateOf: (c: Container) => ExecutionState,
): ExistingWorkload<string>[] {
  return containers.flatMap((c) => {
    const instanceName = parseInstanceKey(c.labels?.name ?? '');
    return instanceName && instanceName.agentName === agentName ? [{ instanceName, runtime, id: c.id, state: stateOf(c) }] : [];
  });
}

/** The containers among `containers` that carry the labels of instance `key` of `agentName`: the only ones a clean-up touches. */
export const ownContainers = (containers: readonly Container[], key: string, agentName: string): Container[] =>
  containers.filter((c) => c.labels?.name === key && c.labels?.agent === agentName);

/** `--follow --since … --until … --tail …` as `podman logs` and `nerdctl logs` take them. */
export function logArgs(o: LogsOptions): string[] {
  return [
    ...(o.follow ? ['--follow'] : []),
    ...(o.since ? ['--since', o.since] : []),
    ...(o.until ? ['--until', o.until] : []),
    ...(o.tail !== undefined ? ['--tail', String(o.tail)] : []),
  ];
}
