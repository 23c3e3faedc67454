// The `containerd` runtime connector (the released agent's third runtime), on the nerdctl CLI and a
// container-state cache of its own, kept by containerd's events (`nerdctl events`) and verified by `nerdctl ps`.
import { type Observable, catchError, concat, defer, finalize, forkJoin, ignoreElements, map, mergeMap, of, switchMap, tap, throwError } from 'rxjs';
import { type NamespacedEvent, containerdReading, containerdState, nerdctlImagePull, parseContainers, parseEvent, parseStats } from './nerdctl.js';
import type { ExecutionState } from '../../execution-state.js';
import type { LogsOptions } from '../../messages.js';
import { RuntimeConfigError } from '../base/run-config.js';
import { containerRunArgs, nameOption, parseContainerConfig } from '../containers/run-config.js';
import { MadeContainers } from '../containers/made-containers.js';
import type { Container, ContainerFigures, WatchState } from '../../ports.js';
import type { CreateOptions, ExistingWorkload, RuntimeConnector } from '../../runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, instanceKey } from '../../workload.js';
import { type Cli, NotInstalled } from '../base/cli.js';
import { spread } from '../../spread.js';
import { labelledWorkloads, logArgs, ownContainers, quietly, tolerateMissing } from '../containers/cli-steps.js';
import { ImagePulls, type PullEngine, createDeadlines, notThere } from '../containers/image-pulls.js';
import type { ImagePull } from '../containers/images.js';
import { type ImageEngine, type ImageNames, imagesUsedBy } from '../containers/image-gc.js';

/**
 * Where containerd workloads live, as nerdctl's general options select it (`--namespace`, `--address`, …): the
 * agent config's, then the workload's own `generalOptions` (the later of a flag given twice wins). Every
 * nerdctl call for a workload carries its scope.
 */
export type Scope = readonly string[];

/** swdd~containerd-nerdctlcli-container-state-cache-all-containers~1: every container of a scope, as `nerdctl ps` shows it (one call: its Status column carries the state and exit code). */
export const listContainers = (cli: Cli, filters: readonly string[] = [], scope: Scope = []): Observable<Container[]> =>
  cli.run([...scope, 'ps', '--all', '--no-trunc', '--format', 'json', ...filters.map((f) => `--filter=${f}`)], { kind: 'query' }).pipe(map(parseContainers));

/** The events of containers and their tasks of one containerd (`containerd`: the general options that select it), in every namespace. */
export const containerdEvents = (cli: Cli, containerd: Scope = []): Observable<NamespacedEvent> =>
  cli.lines([...containerd, 'events', '--format', '{{json .}}']).pipe(
    spread((line) => {
      const event = parseEvent(line);
      return event ? [event] : [];
    }),
  );

/** The figures of containerd's containers (of the default scope) for the metrics: `nerdctl stats` once. */
export const containerdStats = (cli: Cli): Observable<ContainerFigures[]> =>
  cli.run(['stats', '--no-stream', '--no-trunc', '--format', '{{json .}}'], { kind: 'query' }).pipe(map(parseStats));

/** nerdctl's pulls: the pull as the workload's run options ask, its query whether an image is there, `sync` after. */
export const nerdctlPulls = (cli: Cli): PullEngine => ({
  pull: (pull, call) => cli.run(pull.args, call),
  present: (pull) =>
    cli.run(pull.present, { kind: 'query' }).pipe(
      map(() => true),
      catchError(notThere),
    ),
  flush: (deadlineMs) => cli.sibling('sync', { query: deadlineMs, command: deadlineMs }).run([]),
  deadlineOf: (kind) => cli.deadlineOf(kind),
});

/** swdd~containerd-implements-runtime-connector~1, swdd~containerd-uses-nerdctl-cli~1 */
export class ContainerdRuntime implements RuntimeConnector<string> {
  /** swdd~containerd-name-returns-containerd~1 */
  readonly name = 'containerd';
  /** The scope of each container the agent created or found, for the calls that know only its id. */
  private readonly scopes = new Map<string, Scope>();

  /** The starts its creates made, for their state checkers. */
  private readonly made: MadeContainers;

  /** `cli` runs nerdctl; `watchIn` reads the containerd cache of a scope; `defaults`: the agent config's scope. */
  constructor(
    private readonly cli: Cli,
    private readonly watchIn: (scope: Scope) => WatchState,
    private readonly defaults: Scope = [],
    private readonly pulls = new ImagePulls(nerdctlPulls(cli)),
  ) {
    this.made = new MadeContainers(cli.clock);
  }

  /** The image in the workload's scope, pulled (`nerdctl pull` with its run's pull options) unless it is there or the instance it replaces runs it. */
  imagesToFetch(next: WorkloadSpec, current?: WorkloadSpec): string[] {
    return this.pulls.toFetch(this.pullsOf, next, current);
  }

  fetchImages(spec: WorkloadSpec, images: readonly string[]): Observable<string> {
    return this.pulls.fetch(this.pullsOf, spec, images);
  }

  private readonly pullsOf = (s: WorkloadSpec): ImagePull[] => [this.imagePull(s)];

  private imagePull(spec: WorkloadSpec): ImagePull {
    return nerdctlImagePull(parseContainerConfig(spec.runtimeConfig), this.scopeOf(spec));
  }

  private scopeOf(spec: WorkloadSpec): Scope {
    return [...this.defaults, ...parseContainerConfig(spec.runtimeConfig).generalOptions];
  }

  /**
   * swdd~containerd-list-of-existing-workloads-uses-labels~1: in every namespace (the released agent looks in
   * the default one only, and loses the others' workloads).
   */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<string>[]> {
    return this.everywhere([`label=agent=${agentName}`]).pipe(
      map((found) => found.flatMap(({ scope, containers }) => this.noted(scope, labelledWorkloads(containers, agentName, this.name, containerdState)))),
      // A host without nerdctl has no containers the agent made with it: none, and nothing to warn of at each start.
      catchError((err: unknown) => (err instanceof NotInstalled ? of([]) : throwError(() => err))),
    );
  }

  /**
   * swdd~containerd-create-workload-runs-workload~1, swdd~containerd-create-workload-returns-workload-id~1,
   * swdd~containerd-create-workload-creates-labels~1, swdd~containerd-create-workload-sets-optionally-container-name~1,
   * swdd~containerd-create-workload-mounts-fifo-files~1, swdd~containerd-create-mounts-workload-files~1,
   * swdd~containerd-create-workload-deletes-failed-container~1: `nerdctl [scope] run --detach --name
   * <instance> [commandOptions] [mounts] --label=name=… --label=agent=… <image> [commandArgs]`, as podman's.
   */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<string> {
    return defer(() => {
      const config = parseContainerConfig(spec.runtimeConfig);
      // nerdctl (2.0) has no health checks: its run refuses the flags, so the create could never succeed.
      const health = config.commandOptions.find((o) => /^--(health-|no-healthcheck)/.test(o));
      if (health) throw new RuntimeConfigError(`nerdctl runs no health checks: '${health.split('=')[0]}' is not one of its run options.`);
      const scope = this.scopeOf(spec);
      const key = instanceKey(spec.instanceName);
      const agentName = spec.instanceName.agentName;
      // A pull of the image already under way (the workload waited on its dependencies) is waited for, not done again.
      const pull = nerdctlImagePull(config, scope);
      const run$ = this.cli
        .run(containerRunArgs({ ...config, generalOptions: scope }, key, agentName, options), createDeadlines([pull], this.cli))
        .pipe(map((stdout) => stdout.trim().split('\n').at(-1)!));
      return this.pulls.creating([pull], this.made.recorded(run$, nameOption(config.commandOptions) ?? key, key, agentName)).pipe(
        tap((id) => this.scopes.set(id, scope)),
        // What a failed create left goes, so that the retry starts clean: only what carries this instance's
        // labels, never a container by a name the config gives (that may be anyone's).
        catchError((err: unknown) =>
          concat(
            quietly(
              listContainers(this.cli, [`label=name=${key}`], scope).pipe(
                mergeMap((listed) => concat(...ownContainers(listed, key, agentName).map((c) => this.remove(c.id, scope)))),
              ),
            ),
            throwError(() => err),
          ),
        ),
      );
    });
  }

  /** swdd~containerd-get-workload-id-uses-label~1 */
  getWorkloadId(instanceName: WorkloadInstanceName): Observable<string | undefined> {
    return this.everywhere([`label=name=${instanceKey(instanceName)}`]).pipe(
      map(
        (found) =>
          found.flatMap(({ scope, containers }) =>
            this.noted(
              scope,
              containers.map((c) => ({ id: c.id })),
            ),
          )[0]?.id,
      ),
    );
  }

  /**
   * swdd~containerd-start-checker-starts-containerd-state-checker~1, swdd~containerd-state-getter-uses-nerdctlcli~1,
   * swdd~containerd-nerdctlcli-uses-container-state-cache~1: the cache of the workload's scope.
   */
  checkState(id: string, spec: WorkloadSpec): Observable<ExecutionState> {
    return defer(() => this.watchIn(this.scopeOf(spec))(containerdReading(id), [id], this.made.take(id)));
  }

  /** swdd~containerd-create-workload-starts-existing-workload~1: the same container runs again. */
  startAgain(id: string, spec: WorkloadSpec): Observable<void> {
    return defer(() => this.cli.run([...this.scopeOf(spec), 'start', id])).pipe(ignoreElements());
  }

  /** A delete when the container id is not known: whatever carries the instance's name label (in any namespace) or its name goes. */
  deleteByName(instanceName: WorkloadInstanceName): Observable<void> {
    const key = instanceKey(instanceName);
    return concat(
      this.everywhere([`label=name=${key}`]).pipe(
        mergeMap((found) => concat(...found.flatMap(({ scope, containers }) => containers.map((c) => this.remove(c.id, scope))))),
      ),
      this.remove(key, this.defaults),
    );
  }

  /** swdd~containerd-delete-workload-stops-and-removes-workload~1, swdd~containerd-nerdctlcli-removes-workloads-by-id~1 */
  deleteWorkload(id: string): Observable<void> {
    // A start no state checker took goes with its container.
    this.made.take(id);
    return defer(() => this.remove(id, this.scopes.get(id) ?? this.defaults)).pipe(finalize(() => this.scopes.delete(id)));
  }

  private remove(container: string, scope: Scope): Observable<never> {
    return concat(tolerateMissing(this.cli.run([...scope, 'stop', container])), tolerateMissing(this.cli.run([...scope, 'rm', '--force', container])));
  }

  /** swdd~containerd-log-fetching-collects-logs~1 */
  logs(id: string, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return defer(() => this.cli.lines([...(this.scopes.get(id) ?? this.defaults), 'logs', ...logArgs(options), id], paused$));
  }

  /** Remembers the scope the listed containers were found in; passes them on. */
  private noted<T extends { id: string }>(scope: Scope, found: T[]): T[] {
    for (const f of found) this.scopes.set(f.id, scope);
    return found;
  }

  /** Containers that pass `filters` in every namespace nerdctl knows (the default scope's alone when it cannot list them). */
  private everywhere(filters: readonly string[]): Observable<Array<{ scope: Scope; containers: Container[] }>> {
    const inScope = (scope: Scope) => listContainers(this.cli, filters, scope).pipe(map((containers) => ({ scope, containers })));
    return this.cli.run([...this.defaults, 'namespace', 'ls', '--quiet'], { kind: 'query' }).pipe(
      map((out) =>
        out
          .split('\n')
          .map((line) => line.trim())
          .filter((ns) => /^[A-Za-z0-9][A-Za-z0-9._-]{0,75}$/.test(ns)),
      ),
      // Without nerdctl there is no scope to ask either.
      catchError((err: unknown) => (err instanceof NotInstalled ? throwError(() => err) : of([] as string[]))),
      switchMap((namespaces) =>
        namespaces.length === 0
          ? inScope(this.defaults).pipe(map((one) => [one]))
          : forkJoin(namespaces.map((ns) => inScope([...this.defaults, '--namespace', ns]))),
      ),
    );
  }
}

/** The image `image` names among the rows of `nerdctl images --format '{{json .}}'`, and the names of the same digest. */
function namesOf(text: string, image: string): ImageNames | undefined {
  const rows = text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as { Name?: unknown; ID?: unknown });
  const id = rows.find((row) => row.Name === image)?.ID;
  if (typeof id !== 'string') return undefined;
  return { id, names: rows.filter((row) => row.ID === id && typeof row.Name === 'string').map((row) => row.Name as string) };
}

/** containerd's default root: where its images are, unless its config moves them. */
const CONTAINERD_ROOT = '/var/lib/containerd';

/**
 * containerd's images for the collector, in a scope (namespace, address): what its containers use (`nerdctl ps`), `nerdctl rmi` without force (it refuses an image a container uses), and containerd's default root
 * as the store's folder (another containerd's root is not known: no disk guard there).
 */
export function nerdctlImageEngine(cli: Cli): ImageEngine {
  return {
    name: 'containerd',
    imagesInUse: (scope) => listContainers(cli, [], scope).pipe(map(imagesUsedBy)),
    // Every name of containerd's is an image of its own: the image a reference names is its target's digest.
    describe: (scope, image) =>
      cli.run([...scope, 'images', '--no-trunc', '--format', '{{json .}}'], { kind: 'query' }).pipe(map((text) => namesOf(text, image))),
    // By the reference (a digest would remove every name of it), after the collector saw it names the agent's image alone.
    remove: (scope, image) => cli.run([...scope, 'rmi', image]),
    tag: (scope, image, name) => cli.run([...scope, 'tag', image, name]),
    // A name is an image record of its own: removing it leaves the content every other name holds.
    untag: (scope, name) => cli.run([...scope, 'rmi', name]),
    storeFolder: (scope) => (scope.includes('--address') ? throwError(() => new Error("another containerd's root is not known")) : of(CONTAINERD_ROOT)),
  };
}
