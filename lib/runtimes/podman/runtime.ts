// swdd~podman-uses-podman-cli~1, swdd~podman-kube-uses-podman-cli~1 (through lib/runtimes/base/cli.ts): the `podman`
// runtime connector, and the built-in runtimes on the Podman CLI with their shared state cache.
import { statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { EMPTY, type Observable, catchError, concat, defer, ignoreElements, map, of, switchMap, tap, throwError } from 'rxjs';
import type { ExecutionState } from '../../execution-state.js';
import type { LogsOptions } from '../../messages.js';
import { podmanReading, podmanState } from './container-state.js';
import { type HealthCheck, healthCheckOf, withAgentChecks } from './health.js';
import { nameOption, parseContainerConfig } from '../containers/run-config.js';
import { podmanImagePull } from './images.js';
import { LostContainerSweep, type Wanted } from './lost-creates.js';
import type { Container, WatchState } from '../../ports.js';
import type { CreateOptions, ExistingWorkload, RuntimeConnector } from '../../runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, instanceKey } from '../../workload.js';
import { ImagePulls, createDeadlines } from '../containers/image-pulls.js';
import { MadeContainers } from '../containers/made-containers.js';
import type { ImagePull } from '../containers/images.js';
import { CliError } from '../base/cli.js';
import type { PodmanCli } from './podman-cli.js';
import { healthChecks, withHealth } from './health-checks.js';
import { labelledWorkloads, logArgs, ownContainers, quietly } from '../containers/cli-steps.js';

/** swdd~agent-supports-podman~2, swdd~podman-implements-runtime-connector~1 */
export class PodmanRuntime implements RuntimeConnector<string> {
  /** swdd~podman-name-returns-podman~1 */
  readonly name = 'podman';

  /** The starts its creates made, for their state checkers. */
  private readonly made: MadeContainers;

  /** `health`: the agent runs the health checks a workload's commandOptions ask for (else they are left to Podman, as by the released agent). */
  constructor(
    private readonly cli: PodmanCli,
    private readonly watch: WatchState,
    private readonly health = true,
    /**
     * Told of each container the runtime started again in place, once `podman start` returned, with when it was
     * asked (ms): an exit told after that is of the new run, which may have ended before the start returned.
     */
    private readonly startedInPlace?: (id: string, askedAt: number) => void,
    /** Shared with podman-kube: one image storage, one engine's creates. */
    private readonly pulls = new ImagePulls(cli),
    private readonly lost = new LostContainerSweep(cli),
  ) {
    this.made = new MadeContainers(cli.clock);
  }

  /**
   * The image, pulled with the workload's registry options unless it is there (or its `--pull` asks for a pull
   * each time); nothing to do when the instance it replaces runs the same image from the same storage.
   */
  imagesToFetch(next: WorkloadSpec, current?: WorkloadSpec): string[] {
    return this.pulls.toFetch(this.pullsOf, next, current);
  }

  fetchImages(spec: WorkloadSpec, images: readonly string[]): Observable<string> {
    return this.pulls.fetch(this.pullsOf, spec, images);
  }

  private readonly pullsOf = (s: WorkloadSpec): ImagePull[] => [podmanImagePull(parseContainerConfig(s.runtimeConfig))];

  /** The health check the agent runs for this workload, if any. */
  private healthCheck(spec: WorkloadSpec): HealthCheck | undefined {
    if (!this.health) return undefined;
    try {
      return healthCheckOf(parseContainerConfig(spec.runtimeConfig).commandOptions);
    } catch {
      return undefined;
    }
  }

  /** swdd~podman-list-of-existing-workloads-uses-labels~1 */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<string>[]> {
    return this.cli.containers([`label=agent=${agentName}`]).pipe(map((containers) => labelledWorkloads(containers, agentName, this.name, podmanState)));
  }

  /**
   * swdd~podman-create-workload-runs-workload~2, swdd~podman-create-workload-returns-workload-id~1,
   * swdd~podman-create-workload-deletes-failed-container~1
   */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<string> {
    return defer(() => {
      const given = parseContainerConfig(spec.runtimeConfig);
      // Health flags Podman would refuse fail the create here, naming the flag (a RuntimeConfigError).
      const checked = this.health && healthCheckOf(given.commandOptions) !== undefined;
      const config = checked ? { ...given, commandOptions: withAgentChecks(given.commandOptions) } : given;
      const key = instanceKey(spec.instanceName);
      const agentName = spec.instanceName.agentName;
      // A pull of the image already under way (the workload waited on its dependencies) is waited for, not done again.
      const pull = podmanImagePull(given);
      const run$ = this.cli.runContainer(config, key, agentName, options, createDeadlines([pull], this.cli));
      // A container in a storage of its own options is one the cache does not list: its start is not told.
      const told$ = config.generalOptions.length === 0 ? this.made.recorded(run$, nameOption(config.commandOptions) ?? key, key, agentName) : run$;
      const create$ = this.pulls.creating([pull], told$);
      const byKey = nameOption(config.commandOptions) === undefined;
      return this.sweptIfLost(byKey ? { name: key } : undefined, create$).pipe(
        catchError((err: unknown) => this.afterFailedCreate(err, key, agentName, byKey, create$)),
        catchError((err: unknown) => throwError(() => withTmpdirCause(err))),
      );
    });
  }

  /**
   * What a failed create may have left goes, so that the retry starts clean: only containers that carry this
   * instance's labels, never one by a name the config gives (that may be anyone's container). A running one of
   * this very instance (a create of an agent killed mid-way finished after the restart's look for its
   * workloads) is the workload: it is taken as created. `byKey`: the container was to be named after the
   * instance, as the released agent cleans up; that name also goes (a container left only in storage after a
   * crash mid-create is listed by no `ps`), unless a container that is not this instance's holds it; and what
   * such a create left running outside Podman's list goes with it.
   */
  private afterFailedCreate(err: unknown, key: string, agentName: string, byKey: boolean, again$: Observable<string>): Observable<string> {
    const inUse = err instanceof CliError && /already in use/.test(err.message);
    return this.cli.containers([`label=name=${key}`]).pipe(
      catchError(() => of([] as Container[])),
      switchMap((listed) => {
        const own = ownContainers(listed, key, agentName);
        const running = inUse ? own.find((c) => c.state === 'running') : undefined;
        if (running) return of(running.id);
        const holder$ = byKey && inUse ? this.cli.containers([`name=^${key}$`]).pipe(catchError(() => of([] as Container[]))) : of([] as Container[]);
        return holder$.pipe(
          switchMap((holders) => {
            const keyIsOurs = byKey && holders.every((c) => own.some((o) => o.id === c.id));
            return concat(
              quietly(concat(...own.map((c) => this.cli.remove(c.id)), keyIsOurs ? this.cli.remove(key) : EMPTY)),
              byKey ? this.lost.sweep({ name: key }) : EMPTY,
              // A create made again after Podman's service went under it found what the first try left: gone now, it is made once more.
              err instanceof CliError && err.retried && inUse && keyIsOurs ? again$ : throwError(() => err),
            );
          }),
        );
      }),
    );
  }

  /** swdd~podman-get-workload-id-uses-label~1 */
  getWorkloadId(instanceName: WorkloadInstanceName): Observable<string | undefined> {
    return this.cli.containers([`label=name=${instanceKey(instanceName)}`]).pipe(map((cs) => cs[0]?.id));
  }

  /**
   * swdd~podman-start-checker-starts-podman-state-checker~1, swdd~podman-state-getter-uses-podmancli~1,
   * swdd~podman-state-getter-returns-lost-state~1
   */
  checkState(id: string, spec: WorkloadSpec): Observable<ExecutionState> {
    const container$ = this.watch(podmanReading(id), [id], this.made.take(id));
    const check = this.healthCheck(spec);
    return check ? withHealth(container$, () => healthChecks(this.cli, id, check), check, this.cli.clock) : container$;
  }

  /** A delete when the container id is not known: whatever carries the instance's name or its name label goes. */
  deleteByName(instanceName: WorkloadInstanceName): Observable<void> {
    const key = instanceKey(instanceName);
    return concat(
      this.cli.containers([`label=name=${key}`]).pipe(switchMap((cs) => concat(...cs.map((c) => this.cli.remove(c.id))))),
      this.cli.remove(key),
      this.lost.sweep({ name: key }),
    );
  }

  /**
   * `call$`, then, when a call lost its way to Podman's service meanwhile (and so may have been made again by the
   * CLI over half of what the service did), what it left running outside Podman's list goes (./lost-creates.ts):
   * a workload is created or removed only with no process of an earlier try left. Only the agent's own names are
   * looked for: a name a config gives may be another storage's container.
   */
  private sweptIfLost<T>(wanted: Wanted | undefined, call$: Observable<T>): Observable<T> {
    return defer(() => {
      const lostBefore = this.cli.lostWays;
      return concat(
        call$,
        defer(() => (wanted && this.cli.lostWays !== lostBefore ? this.lost.sweep(wanted) : EMPTY)),
      );
    });
  }

  stop(id: string): Observable<void> {
    return this.cli.stop(id);
  }

  /** `podman start` (with the config's generalOptions, as the released agent gives them): the same container runs again. */
  startAgain(id: string, spec: WorkloadSpec): Observable<void> {
    return defer(() => {
      const askedAt = this.cli.clock.now();
      return this.cli
        .start(id, parseContainerConfig(spec.runtimeConfig).generalOptions)
        .pipe(ignoreElements(), tap({ complete: () => this.startedInPlace?.(id, askedAt) }));
    });
  }

  /**
   * swdd~podman-delete-workload-stops-and-removes-workload~1: one process does both: `rm --force` stops the
   * container as `podman stop` does (its stop signal, then its own stop timeout before SIGKILL), then removes it.
   * Removed means gone: a remove made again after the service was lost under it leaves no process behind.
   */
  deleteWorkload(id: string): Observable<void> {
    // A start no state checker took goes with its container.
    this.made.take(id);
    return this.sweptIfLost({ id }, this.cli.remove(id));
  }

  logs(id: string, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return this.cli.logs({ container: id }, logArgs(options), paused$);
  }
}

/** How little room in the temporary folder counts as none: Podman writes its auth and config files there. */
const LEAST_TMPDIR_BYTES = 64 * 1024;

/**
 * A create that failed while the temporary folder has no room says so first: Podman's own words then often name
 * something else ("failed to parse X-Registry-Auth header").
 */
function withTmpdirCause(err: unknown): unknown {
  if (!(err instanceof CliError)) return err;
  const folder = tmpdir();
  let want: string | undefined;
  try {
    const { bavail, bsize, files, ffree } = statfsSync(folder);
    want = bavail * bsize < LEAST_TMPDIR_BYTES ? 'no room' : files > 0 && ffree === 0 ? 'no inode' : undefined;
  } catch {
    return err;
  }
  if (!want) return err;
  return new CliError(`The temporary folder '${folder}' has ${want} left (TMPDIR): ${err.message}`, err.exitCode);
}
