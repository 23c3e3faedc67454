// The `containerd` runtime connector (the released agent's third runtime), on the nerdctl CLI and a
// container-state cache of its own, kept by containerd's events (`nerdctl events`) and verified by `nerdctl ps`.
import { type Observable, catchError, concat, defer, ignoreElements, map, mergeMap, throwError } from 'rxjs';
import { containerdReading, containerdState, parseContainers, parseEvent } from '../containerd/nerdctl.js';
import type { ExecutionState } from '../execution-state.js';
import type { LogsOptions } from '../messages.js';
import type { Container } from '../podman/container.js';
import { nameOption, parsePodmanConfig, podmanRunArgs } from '../podman/runtime-config.js';
import type { ContainerEvent, WatchState } from '../ports.js';
import type { CreateOptions, ExistingWorkload, RuntimeConnector } from '../runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, instanceKey } from '../workload.js';
import type { PodmanCli } from './podman-cli.js';
import { labelledWorkloads, logArgs, quietly, tolerateMissing } from './cli-steps.js';

/** swdd~containerd-nerdctlcli-container-state-cache-all-containers~1: every container, as `nerdctl ps` shows it (one call: its Status column carries the state and exit code). */
export const listContainers = (cli: PodmanCli, filters: readonly string[] = []): Observable<Container[]> =>
  cli.run(['ps', '--all', '--no-trunc', '--format', 'json', ...filters.map((f) => `--filter=${f}`)], undefined, 'query').pipe(map(parseContainers));

/** containerd's events of containers and their tasks, as the container cache takes them. */
export const containerdEvents = (cli: PodmanCli): Observable<ContainerEvent> =>
  cli.lines(['events', '--format', '{{json .}}']).pipe(
    mergeMap((line) => {
      const event = parseEvent(line);
      return event ? [event] : [];
    }),
  );

/** swdd~containerd-implements-runtime-connector~1, swdd~containerd-uses-nerdctl-cli~1 */
export class ContainerdRuntime implements RuntimeConnector<string> {
  /** swdd~containerd-name-returns-containerd~1 */
  readonly name = 'containerd';

  /** `cli` runs nerdctl; `watch` reads the containerd cache. */
  constructor(
    private readonly cli: PodmanCli,
    private readonly watch: WatchState,
  ) {}

  /** swdd~containerd-list-of-existing-workloads-uses-labels~1 */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<string>[]> {
    return listContainers(this.cli, [`label=agent=${agentName}`]).pipe(
      map((containers) => labelledWorkloads(containers, agentName, this.name, containerdState)),
    );
  }

  /**
   * swdd~containerd-create-workload-runs-workload~1, swdd~containerd-create-workload-returns-workload-id~1,
   * swdd~containerd-create-workload-creates-labels~1, swdd~containerd-create-workload-sets-optionally-container-name~1,
   * swdd~containerd-create-workload-mounts-fifo-files~1, swdd~containerd-create-mounts-workload-files~1,
   * swdd~containerd-create-workload-deletes-failed-container~1: `nerdctl [generalOptions] run --detach --name
   * <instance> [commandOptions] [mounts] --label=name=… --label=agent=… <image> [commandArgs]`, as podman's.
   */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<string> {
    return defer(() => {
      const config = parsePodmanConfig(spec.runtimeConfig);
      const key = instanceKey(spec.instanceName);
      const container = nameOption(config.commandOptions) ?? key;
      return this.cli.run(podmanRunArgs(config, key, spec.instanceName.agentName, options)).pipe(
        map((stdout) => stdout.trim().split('\n').at(-1)!),
        // What a failed create left goes, so that the retry starts clean.
        catchError((err: unknown) =>
          concat(
            quietly(this.remove(container)),
            throwError(() => err),
          ),
        ),
      );
    });
  }

  /** swdd~containerd-get-workload-id-uses-label~1 */
  getWorkloadId(instanceName: WorkloadInstanceName): Observable<string | undefined> {
    return listContainers(this.cli, [`label=name=${instanceKey(instanceName)}`]).pipe(map((cs) => cs[0]?.Id));
  }

  /**
   * swdd~containerd-start-checker-starts-containerd-state-checker~1, swdd~containerd-state-getter-uses-nerdctlcli~1,
   * swdd~containerd-nerdctlcli-uses-container-state-cache~1
   */
  checkState(id: string): Observable<ExecutionState> {
    return this.watch(containerdReading(id), [id]);
  }

  /** swdd~containerd-create-workload-starts-existing-workload~1: the same container runs again. */
  startAgain(id: string, spec: WorkloadSpec): Observable<void> {
    return defer(() => this.cli.run([...parsePodmanConfig(spec.runtimeConfig).generalOptions, 'start', id])).pipe(ignoreElements());
  }

  /** A delete when the container id is not known: whatever carries the instance's name label or name goes. */
  deleteByName(instanceName: WorkloadInstanceName): Observable<void> {
    const key = instanceKey(instanceName);
    return concat(listContainers(this.cli, [`label=name=${key}`]).pipe(mergeMap((cs) => concat(...cs.map((c) => this.remove(c.Id))))), this.remove(key));
  }

  /** swdd~containerd-delete-workload-stops-and-removes-workload~1, swdd~containerd-nerdctlcli-removes-workloads-by-id~1 */
  deleteWorkload(id: string): Observable<void> {
    return this.remove(id);
  }

  private remove(container: string): Observable<never> {
    return concat(tolerateMissing(this.cli.run(['stop', container])), tolerateMissing(this.cli.run(['rm', '--force', container])));
  }

  /** swdd~containerd-log-fetching-collects-logs~1 */
  logs(id: string, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return this.cli.lines(['logs', ...logArgs(options), id], paused$);
  }
}
