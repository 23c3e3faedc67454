// The `podman` and `podman-kube` runtime connectors, both on the Podman CLI and the shared state cache.
import { type FSWatcher, existsSync, readFileSync, watch } from 'node:fs';
import path from 'node:path';
import {
  EMPTY,
  Observable,
  catchError,
  concat,
  defer,
  distinctUntilChanged,
  exhaustMap,
  forkJoin,
  ignoreElements,
  map,
  merge,
  mergeMap,
  of,
  scan,
  startWith,
  switchMap,
  takeWhile,
  tap,
  throwError,
  timer,
} from 'rxjs';
import { type ExecutionState, is, sameState } from '../execution-state.js';
import { heardAt, whenHeard } from '../heard-at.js';
import type { Logger } from '../logger.js';
import type { LogsOptions } from '../messages.js';
import type { Container } from '../podman/container.js';
import { kubeReading, kubeWorkloadState, podmanReading, podmanState } from '../podman/container-state.js';
import { EXIT_FILE_TAKEN } from '../podman/container-view.js';
import {
  type CheckResult,
  type Health,
  type HealthCheck,
  NO_CHECK_YET,
  asksForHealthCheck,
  combinedHealth,
  healthCheckOf,
  healthCheckOfConfig,
  healthOfInspect,
  healthState,
  namedChecks,
  nextHealth,
  timedOut,
  withAgentChecks,
} from '../podman/health.js';
import {
  RuntimeConfigError,
  type ImagePull,
  imagePull,
  nameOption,
  parseKubeConfig,
  parsePodmanConfig,
  podmanRunArgs,
  withControlInterface,
} from '../podman/runtime-config.js';
import type { ContainerEvent, WatchState } from '../ports.js';
import type { Running } from '../running-workloads.js';
import type { CreateOptions, ExistingWorkload, RuntimeConnector } from '../runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, instanceKey, parseInstanceKey } from '../workload.js';
import { ImagePulls } from './image-pulls.js';
import { type PodmanCli, PodmanError, type Volume } from './podman-cli.js';

/** What Podman and nerdctl say of a container or volume that is not there. */
const missing = (err: unknown) => err instanceof PodmanError && /no such (container|volume)|no container with name or id/i.test(err.message);
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

/**
 * A health-checked workload's state (lib/podman/health.ts): while its containers run, `health$` (subscribed
 * anew each time they run) decides; once unhealthy it stays Failed until they run again.
 */
function withHealth(container$: Observable<ExecutionState>, health$: () => Observable<Health>, check: HealthCheck): Observable<ExecutionState> {
  return container$.pipe(
    switchMap((state) =>
      (is(state, 'Running', 'Ok') ? health$().pipe(startWith(undefined)) : of(undefined)).pipe(
        // A check's result is the change its state shows; without one, the container's change is.
        map((health) => ({ state, health, at: health ? Date.now() : whenHeard(state) })),
      ),
    ),
    scan((shown: { failedWith?: string; state?: ExecutionState; at?: number }, { state, health, at }) => {
      const failedWith = health?.status === 'unhealthy' ? health.output : is(state, 'Running') ? undefined : shown.failedWith;
      return { failedWith, state: healthState(state, health, failedWith, check), at };
    }, {}),
    map((shown) => heardAt(shown.state!, shown.at)),
    distinctUntilChanged(sameState),
  );
}

/**
 * A container's health, checked once per interval (never two checks at once) and counted by Podman's rule
 * (`nextHealth`): a check that outlives its timeout has failed. An unhealthy container is stopped, and checked
 * no more. A check that cannot run (the container stopped) says nothing. Where Podman's own timers run the
 * checks (`podmanRunsThem`), the agent only reads the status they leave: each check runs once.
 */
function healthChecks(cli: PodmanCli, id: string, check: HealthCheck, podmanRunsThem = false): Observable<Health> {
  const statuses$ = podmanRunsThem
    ? timer(check.intervalMs, check.intervalMs).pipe(
        exhaustMap(() => cli.run(['inspect', '--format', '{{json .State.Health}}', id], undefined, 'query').pipe(catchError(() => EMPTY))),
        map(healthOfInspect),
      )
    : defer(() => {
        const started = Date.now();
        return timer(check.intervalMs, check.intervalMs).pipe(
          exhaustMap(() => cli.check(id, check.argv, check.timeoutMs)),
          mergeMap((outcome): Observable<CheckResult> => {
            if (outcome.kind === 'not-run') return EMPTY;
            const output = outcome.kind === 'timed-out' ? timedOut(check) : outcome.output;
            return of({ passed: outcome.kind === 'passed', output, sinceStartMs: Date.now() - started });
          }),
          scan((count, result) => nextHealth(count, result, check), NO_CHECK_YET),
          map((count) => count.health),
        );
      });
  return statuses$.pipe(
    tap((health) => health.status === 'unhealthy' && stopSoon(cli, id)),
    takeWhile((health) => health.status !== 'unhealthy', true),
  );
}

/**
 * Stops a container, on its own: the stop changes the state it is watched by, which ends the watch, and
 * a `podman stop` cut short leaves the container `stopping` for good. It has the command deadline.
 */
function stopSoon(cli: PodmanCli, id: string): void {
  cli.run(['stop', id]).subscribe({ error: () => undefined });
}

/** A container of a podman-kube workload with the health check Podman made of its livenessProbe. */
interface Probe {
  readonly id: string;
  readonly name: string;
  readonly check: HealthCheck;
}

/** The health of all probed containers of a workload, each checked on its own interval (by Podman's timers where they run). */
const probesHealth = (cli: PodmanCli, probes: readonly Probe[], podmanTimers: boolean): Observable<Health> =>
  merge(...probes.map((p, i) => healthChecks(cli, p.id, p.check, podmanTimers).pipe(map((health) => ({ i, health }))))).pipe(
    scan(
      (latest, { i, health }) => latest.map((c, j) => (j === i ? { ...c, health } : c)),
      probes.map((p): { name: string; health?: Health } => ({ name: p.name })),
    ),
    map((latest): Health => combinedHealth(latest) ?? { status: 'starting' }),
  );

/** swdd~agent-supports-podman~2, swdd~podman-implements-runtime-connector~1 */
export class PodmanRuntime implements RuntimeConnector<string> {
  /** swdd~podman-name-returns-podman~1 */
  readonly name = 'podman';

  /** `health`: the agent runs the health checks a workload's commandOptions ask for (else they are left to Podman, as by the released agent). */
  constructor(
    private readonly cli: PodmanCli,
    private readonly watch: WatchState,
    private readonly health = true,
    private readonly pulls = new ImagePulls(cli),
  ) {}

  /**
   * The image, pulled with the workload's registry options unless it is there (or its `--pull` asks for a pull
   * each time); nothing to do when the instance it replaces runs the same image from the same storage.
   */
  fetchImage(spec: WorkloadSpec, current?: WorkloadSpec): Observable<never> | undefined {
    let pull: ImagePull;
    try {
      pull = imagePull(parsePodmanConfig(spec.runtimeConfig));
    } catch (err) {
      return throwError(() => err);
    }
    if (pull.policy === 'never') return undefined;
    if (pull.policy === 'missing' && current?.runtime === this.name && sameImage(pull, current)) return undefined;
    return this.pulls.ensure(pull);
  }

  /** The health check the agent runs for this workload, if any. */
  private healthCheck(spec: WorkloadSpec): HealthCheck | undefined {
    if (!this.health) return undefined;
    try {
      return healthCheckOf(parsePodmanConfig(spec.runtimeConfig).commandOptions);
    } catch {
      return undefined;
    }
  }

  /** swdd~podman-list-of-existing-workloads-uses-labels~1 */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<string>[]> {
    return this.cli.listContainers([`label=agent=${agentName}`]).pipe(map((containers) => labelledWorkloads(containers, agentName, this.name, podmanState)));
  }

  /**
   * swdd~podman-create-workload-runs-workload~2, swdd~podman-create-workload-returns-workload-id~1,
   * swdd~podman-create-workload-deletes-failed-container~1
   */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<string> {
    return defer(() => {
      const given = parsePodmanConfig(spec.runtimeConfig);
      // Health flags Podman would refuse fail the create here, naming the flag (a RuntimeConfigError).
      const checked = this.health && healthCheckOf(given.commandOptions) !== undefined;
      const config = checked ? { ...given, commandOptions: withAgentChecks(given.commandOptions) } : given;
      const key = instanceKey(spec.instanceName);
      const container = nameOption(config.commandOptions) ?? key;
      // A pull of the image already under way (the workload waited on its dependencies) is waited for, not done again.
      return concat(this.pulls.under(imagePull(given)), this.cli.run(podmanRunArgs(config, key, spec.instanceName.agentName, options))).pipe(
        map((stdout) => stdout.trim().split('\n').at(-1)!),
        catchError((err: unknown) => {
          // What a failed create may have left goes, so that the retry starts clean: also a container that
          // holds the name after a crash mid-create (even one only in storage) — unless it runs: then the
          // name belongs to a workload that runs, and the failure is reported as it is.
          const inUse = err instanceof PodmanError && /already in use/.test(err.message);
          const leftover$ = inUse
            ? this.cli
                .listContainers([`name=^${container}$`])
                .pipe(switchMap((cs) => (cs.some((c) => c.State === 'running') ? EMPTY : this.forceRemove(container))))
            : this.forceRemove(container);
          return concat(
            quietly(leftover$),
            throwError(() => err),
          );
        }),
      );
    });
  }

  /** swdd~podman-get-workload-id-uses-label~1 */
  getWorkloadId(instanceName: WorkloadInstanceName): Observable<string | undefined> {
    return this.cli.listContainers([`label=name=${instanceKey(instanceName)}`]).pipe(map((cs) => cs[0]?.Id));
  }

  /**
   * swdd~podman-start-checker-starts-podman-state-checker~1, swdd~podman-state-getter-uses-podmancli~1,
   * swdd~podman-state-getter-returns-lost-state~1
   */
  checkState(id: string, spec: WorkloadSpec): Observable<ExecutionState> {
    const container$ = this.watch(podmanReading(id), [id]);
    const check = this.healthCheck(spec);
    return check ? withHealth(container$, () => healthChecks(this.cli, id, check), check) : container$;
  }

  /** A delete when the container id is not known: whatever carries the instance's name or its name label goes. */
  deleteByName(instanceName: WorkloadInstanceName): Observable<void> {
    const key = instanceKey(instanceName);
    return concat(
      this.cli.listContainers([`label=name=${key}`]).pipe(switchMap((cs) => concat(...cs.map((c) => this.forceRemove(c.Id))))),
      this.forceRemove(key),
    );
  }

  private forceRemove(container: string): Observable<never> {
    return tolerateMissing(this.cli.run(['rm', '--force', container]));
  }

  /** `podman start` (with the config's generalOptions, as the released agent gives them): the same container runs again. */
  startAgain(id: string, spec: WorkloadSpec): Observable<void> {
    return defer(() => this.cli.run([...parsePodmanConfig(spec.runtimeConfig).generalOptions, 'start', id])).pipe(ignoreElements());
  }

  /**
   * swdd~podman-delete-workload-stops-and-removes-workload~1: one process does both: `rm --force` stops the
   * container as `podman stop` does (its stop signal, then its own stop timeout before SIGKILL), then removes it.
   */
  deleteWorkload(id: string): Observable<void> {
    return this.forceRemove(id);
  }

  logs(id: string, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return this.cli.lines(['logs', ...logArgs(options), id], paused$);
  }
}

/** Whether `current`'s config names the same image in the same storage (its general options) as `pull`. */
function sameImage(pull: ImagePull, current: WorkloadSpec): boolean {
  const storage = (p: ImagePull) => p.args.slice(0, p.args.indexOf('pull')).join('\0');
  try {
    const now = imagePull(parsePodmanConfig(current.runtimeConfig));
    return now.image === pull.image && storage(now) === storage(pull);
  } catch {
    return false;
  }
}

/** The workloads of `agentName` among containers found by their `agent` label: those whose `name` label is an instance of it. */
export function labelledWorkloads(
  containers: readonly Container[],
  agentName: string,
  runtime: string,
  stateOf: (c: Container) => ExecutionState,
): ExistingWorkload<string>[] {
  return containers.flatMap((c) => {
    const instanceName = parseInstanceKey(c.Labels?.name ?? '');
    return instanceName && instanceName.agentName === agentName ? [{ instanceName, runtime, id: c.Id, state: stateOf(c) }] : [];
  });
}

/** `--follow --since … --until … --tail …` as `podman logs` and `nerdctl logs` take them. */
export function logArgs(o: LogsOptions): string[] {
  return [
    ...(o.follow ? ['--follow'] : []),
    ...(o.since ? ['--since', o.since] : []),
    ...(o.until ? ['--until', o.until] : []),
    ...(o.tail !== undefined ? ['--tail', String(o.tail)] : []),
  ];
}

/** The podman-kube runtime's handle of a workload: what `kube down`, the state getter and the logs need. */
export interface KubeId {
  readonly instance: string;
  readonly pods: readonly string[];
  readonly manifest: string;
  readonly downOptions: readonly string[];
}

/** Whether a running workload is a podman-kube one that runs in `pod` (an id, whole or cut short, as Podman shows it). */
export const runsInPod = ({ runtime, id }: Running, pod: string): boolean =>
  runtime.name === 'podman-kube' && (id as KubeId).pods.some((p) => p === pod || p.startsWith(pod) || pod.startsWith(p));

/**
 * The data label of a podman-kube bookkeeping volume: base64 without padding, as the released agent
 * writes and reads it (so a host can switch agents and keep its pods); padded labels are read too.
 */
export const toBase64 = (text: string) => Buffer.from(text).toString('base64').replace(/=+$/, '');
export const fromBase64 = (text: string) => Buffer.from(text, 'base64').toString();

/** The pod ids in the output of `podman kube play`. */
export function podsPlayed(output: string): string[] {
  const pods: string[] = [];
  let section = '';
  for (const line of output.split('\n').map((l) => l.trim())) {
    if (/^[A-Za-z ]+:$/.test(line)) section = line;
    else if (section === 'Pod:' && /^[0-9a-f]{12,}$/.test(line)) pods.push(line);
  }
  return pods;
}

/** swdd~agent-supports-podman-kube-runtime~1, swdd~podman-kube-implements-runtime-connector~1 */
export class PodmanKubeRuntime implements RuntimeConnector<KubeId> {
  /** swdd~podman-kube-name-returns-podman-kube~1 */
  readonly name = 'podman-kube';

  /**
   * `health`: the agent runs the health checks Podman made of the containers' livenessProbes; `podmanTimers`:
   * Podman's own timers run them (the host runs systemd), so the agent reads their status instead.
   */
  constructor(
    private readonly cli: PodmanCli,
    private readonly watch: WatchState,
    private readonly log?: Logger,
    private readonly health: { readonly on: boolean; readonly podmanTimers: boolean } = { on: true, podmanTimers: false },
  ) {}

  /** swdd~podman-kube-list-existing-workloads-using-config-volumes~1 */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<KubeId>[]> {
    return forkJoin([this.cli.listVolumes(), this.cli.listContainers()]).pipe(
      map(([volumes, containers]) => {
        const byName = new Map(volumes.map((v) => [v.Name, v]));
        return volumes.flatMap((v) => {
          const instanceName = v.Name.endsWith('.config') ? parseInstanceKey(v.Name.slice(0, -'.config'.length)) : undefined;
          if (!instanceName || instanceName.agentName !== agentName) return [];
          const id = this.idFromVolumes(instanceKey(instanceName), v, byName.get(`${instanceKey(instanceName)}.pods`));
          if (!id) return [];
          return [{ instanceName, runtime: this.name, id, state: kubeWorkloadState(id.pods, containers) }];
        });
      }),
    );
  }

  /**
   * swdd~podman-kube-create-workload-apply-manifest~1, swdd~podman-kube-create-workload-returns-workload-id~1,
   * swdd~podman-kube-create-workload-creates-config-volume~1, swdd~podman-kube-create-workload-creates-pods-volume~1,
   * swdd~podman-kube-create-continues-if-cannot-create-volume~1, swdd~podman-kube-create-starts-podman-kube-state-getter~1
   */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<KubeId> {
    return defer(() => {
      const config = parseKubeConfig(spec.runtimeConfig);
      if (spec.files.length > 0) {
        // swdd~podman-kube-rejects-workload-files~1
        throw new RuntimeConfigError('Workload files are not supported for podman-kube runtime. Use ConfigMaps instead.');
      }
      // The 1.x agent mounts the Control Interface into the container the runtime config names.
      const manifest = options.controlInterfacePath
        ? withControlInterface(config.manifest, config.controlInterfaceTarget, options.controlInterfacePath)
        : config.manifest;
      const instance = instanceKey(spec.instanceName);
      const play = [...config.generalOptions, 'kube', 'play', '--quiet', ...config.playOptions, '-'];
      return concat(
        this.volume(`${instance}.config`, spec.runtimeConfig),
        this.cli.run(play, manifest).pipe(
          // What a failed play left behind goes, so that a retry starts clean.
          catchError((err: unknown) =>
            concat(
              quietly(this.cli.run(['kube', 'down', '-'], manifest)),
              quietly(this.removeVolumes(instance)),
              throwError(() => err),
            ),
          ),
          switchMap((output) => {
            const id: KubeId = { instance, pods: podsPlayed(output), manifest, downOptions: config.downOptions };
            return concat(this.volume(`${instance}.pods`, JSON.stringify(id.pods)), of(id));
          }),
        ),
      );
    });
  }

  /** swdd~podman-kube-get-workload-id-uses-volumes~1 */
  getWorkloadId(instanceName: WorkloadInstanceName): Observable<KubeId | undefined> {
    const instance = instanceKey(instanceName);
    return this.cli.listVolumes([`name=${instance}`]).pipe(
      map((volumes) => {
        const byName = new Map(volumes.map((v) => [v.Name, v]));
        return this.idFromVolumes(instance, byName.get(`${instance}.config`), byName.get(`${instance}.pods`));
      }),
    );
  }

  /**
   * The pods' containers' states combined. With health checks on, the containers Podman gave a health
   * check (from their livenessProbe) are checked by the agent as podman workloads are: the workload is
   * Running(Ok) once all are healthy, and Failed once one is unhealthy (that container is stopped).
   */
  checkState(id: KubeId, spec: WorkloadSpec): Observable<ExecutionState> {
    const container$ = this.watch(kubeReading(id.pods));
    if (!this.health.on || !asksForHealthCheck(spec)) return container$;
    return this.probes(id.pods).pipe(
      catchError(() => of([])),
      switchMap((probes) =>
        probes.length === 0 ? container$ : withHealth(container$, () => probesHealth(this.cli, probes, this.health.podmanTimers), namedChecks(probes)),
      ),
    );
  }

  /** The containers of the pods that Podman gave a health check, with it. */
  private probes(pods: readonly string[]): Observable<Probe[]> {
    // No pod, no filter: `podman ps` would list the host's every container.
    if (pods.length === 0) return of([]);
    return this.cli.listContainers(pods.map((pod) => `pod=${pod}`)).pipe(
      map((containers) => containers.filter((c) => !c.IsInfra)),
      switchMap((containers) =>
        containers.length === 0
          ? of([])
          : this.cli.run(['inspect', '--format', '{{.Id}} {{json .Config.Healthcheck}}', ...containers.map((c) => c.Id)], undefined, 'query').pipe(
              map((out) =>
                out.split('\n').flatMap((line): Probe[] => {
                  const [containerId, json] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
                  const check = healthCheckOfConfig(json);
                  const name = containers.find((c) => c.Id === containerId)?.Names?.[0] ?? containerId.slice(0, 12);
                  return check && containerId ? [{ id: containerId, name, check }] : [];
                }),
              ),
            ),
      ),
    );
  }

  /** swdd~podman-kube-delete-workload-downs-manifest-file~1, swdd~podman-kube-delete-removes-volumes~1 */
  deleteWorkload({ instance, manifest, downOptions }: KubeId): Observable<void> {
    return concat(this.cli.run(['kube', 'down', ...downOptions, '-'], manifest).pipe(ignoreElements()), this.removeVolumes(instance));
  }

  /** The logs of all containers of the workload's pods. */
  logs(id: KubeId, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return merge(...id.pods.map((pod) => this.cli.lines(['pod', 'logs', ...logArgs(options), pod], paused$)));
  }

  private volume(name: string, data: string): Observable<never> {
    return this.cli.run(['volume', 'create', `--label=data=${toBase64(data)}`, name]).pipe(
      ignoreElements(),
      catchError((err: unknown) => {
        this.log?.warn(`Could not create the volume '${name}' (the workload runs, but is not found after an agent restart): ${String(err)}`);
        return EMPTY;
      }),
    );
  }

  private removeVolumes(instance: string): Observable<never> {
    return tolerateMissing(this.cli.run(['volume', 'rm', '--force', `${instance}.config`, `${instance}.pods`]));
  }

  private idFromVolumes(instance: string, config?: Volume, pods?: Volume): KubeId | undefined {
    try {
      const { manifest, downOptions } = parseKubeConfig(fromBase64(config?.Labels?.data ?? ''));
      const podList = pods?.Labels?.data ? (JSON.parse(fromBase64(pods.Labels.data)) as string[]) : [];
      return { instance, pods: podList, manifest, downOptions };
    } catch {
      return undefined;
    }
  }
}

/**
 * Podman's container events from one long-running `podman events` (no periodic calls): a `died` event
 * carries the exit code. Ends when the process ends (the cache starts it again); lines that are no
 * event are passed over.
 */
export function containerEvents(cli: PodmanCli): Observable<ContainerEvent> {
  return cli.lines(['events', '--format', 'json', '--filter', 'type=container']).pipe(
    mergeMap((line): ContainerEvent[] => {
      try {
        const e = JSON.parse(line) as {
          ID?: unknown;
          Status?: unknown;
          ContainerExitCode?: unknown;
          Time?: unknown;
          Name?: unknown;
          Attributes?: unknown;
          PodID?: unknown;
        };
        if (typeof e.ID !== 'string' || typeof e.Status !== 'string') return [];
        const at = typeof e.Time === 'string' ? Date.parse(e.Time) : Number.NaN;
        return [
          {
            id: e.ID,
            status: e.Status,
            exitCode: typeof e.ContainerExitCode === 'number' ? e.ContainerExitCode : undefined,
            at: Number.isFinite(at) ? at : undefined,
            container:
              typeof e.Name === 'string' ? { Names: [e.Name], Labels: labelsOf(e.Attributes), Pod: typeof e.PodID === 'string' ? e.PodID : '' } : undefined,
          },
        ];
      } catch {
        return [];
      }
    }),
  );
}

/** An event's attributes as labels: Podman puts a container's labels there (and its image's name), strings only. */
function labelsOf(attributes: unknown): Record<string, string> {
  if (typeof attributes !== 'object' || attributes === null) return {};
  return Object.fromEntries(Object.entries(attributes).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

/** Where conmon writes a container's exit code the moment it exits (rootful Podman). */
export const CONMON_EXIT_DIR = '/run/libpod/exits';

/**
 * The exits conmon records in its exit folder, as died events: they come as the container exits, some
 * 100–200 ms before Podman's own `died` event (which waits for `podman container cleanup`); a file that
 * goes is EXIT_FILE_TAKEN (Podman has taken the exit in). Nothing when the folder is not there.
 */
export function conmonExits(dir = CONMON_EXIT_DIR): Observable<ContainerEvent> {
  return new Observable<ContainerEvent>((subscriber) => {
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, (_event, name) => {
        if (!name || !/^[0-9a-f]{64}$/.test(name)) return;
        let text: string;
        try {
          text = readFileSync(path.join(dir, name), 'utf8');
        } catch {
          // Gone: Podman took it (a cleanup, or a start of the container again).
          subscriber.next({ id: name, status: EXIT_FILE_TAKEN });
          return;
        }
        const code = Number(text.slice(0, 16).trim());
        if (Number.isInteger(code)) subscriber.next({ id: name, status: 'died', exitCode: code, at: Date.now() });
      });
    } catch {
      subscriber.complete();
      return undefined;
    }
    watcher.on('error', () => subscriber.complete());
    return () => watcher.close();
  });
}

/** swdd~agent-supports-multiple-runtime-connectors~1: the built-in runtimes, sharing one Podman CLI and one state checker. */
export function podmanRuntimes(
  cli: PodmanCli,
  watch: WatchState,
  log: Logger,
  { health = true, podmanTimers = systemdRuns() } = {},
): Map<string, RuntimeConnector> {
  return new Map<string, RuntimeConnector>([
    ['podman', new PodmanRuntime(cli, watch, health)],
    ['podman-kube', new PodmanKubeRuntime(cli, watch, log, { on: health, podmanTimers })],
  ]);
}

/**
 * Whether the host runs systemd (as sd_booted() tells it), and so Podman's health-check timers: a
 * podman-kube container's check (of its livenessProbe) then runs by Podman, which the agent cannot turn off.
 */
export const systemdRuns = (): boolean => existsSync('/run/systemd/system');
