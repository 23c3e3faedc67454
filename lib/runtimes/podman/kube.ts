// The `podman-kube` runtime connector: a workload is a Kubernetes manifest played with `podman kube play`,
// found again through its bookkeeping volumes, and checked through its pods' containers.
import { EMPTY, type Observable, catchError, concat, defer, ignoreElements, map, merge, of, switchMap, throwError } from 'rxjs';
import type { ExecutionState } from '../../execution-state.js';
import type { Logger } from '../../logger.js';
import type { LogsOptions } from '../../messages.js';
import { kubeReading, kubeWorkloadState } from './container-state.js';
import { asksForHealthCheck, healthCheckOfConfig, namedChecks } from './health.js';
import { RuntimeConfigError } from '../base/run-config.js';
import { isPodNamed, parseKubeConfig, podNames, withControlInterface } from './kube-config.js';
import type { WatchState } from '../../ports.js';
import type { Running } from '../../running-workloads.js';
import type { CreateOptions, ExistingWorkload, RuntimeConnector } from '../../runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, instanceKey, parseInstanceKey } from '../../workload.js';
import type { PodmanCli, Volume } from './podman-cli.js';
import { type Probe, probesHealth, withHealth } from './health-checks.js';
import { logArgs, quietly } from '../containers/cli-steps.js';
import { ImagePulls, createDeadlines } from '../containers/image-pulls.js';
import type { ImagePull } from '../containers/images.js';
import { kubeImagePulls } from './images.js';

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
    /** Shared with the podman runtime: one image storage. */
    /** Shared with the podman runtime: one image storage, one engine's creates. */
    private readonly pulls = new ImagePulls(cli),
  ) {}

  /** The images of the manifest's containers that are not there (or whose imagePullPolicy is Always), pulled; none that the instance it replaces runs. */
  imagesToFetch(next: WorkloadSpec, current?: WorkloadSpec): string[] {
    return this.pulls.toFetch(this.pullsOf, next, current);
  }

  fetchImages(spec: WorkloadSpec, images: readonly string[]): Observable<string> {
    return this.pulls.fetch(this.pullsOf, spec, images);
  }

  private readonly pullsOf = (s: WorkloadSpec): ImagePull[] => kubeImagePulls(parseKubeConfig(s.runtimeConfig));

  /**
   * swdd~podman-kube-list-existing-workloads-using-config-volumes~1: the agent's own volumes only (its name is
   * the instance keys' last part; agent names are letters, digits, `_` and `-`, nothing a regular expression
   * reads), and the containers' states asked for only when there is a pod of its own: an agent starting without
   * one runs a single Podman process here.
   */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<KubeId>[]> {
    return this.cli.volumes([`name=\\.${agentName}\\.(config|pods)$`]).pipe(
      switchMap((volumes) => {
        const byName = new Map(volumes.map((v) => [v.Name, v]));
        const found = volumes.flatMap((v) => {
          const instanceName = v.Name.endsWith('.config') ? parseInstanceKey(v.Name.slice(0, -'.config'.length)) : undefined;
          if (!instanceName || instanceName.agentName !== agentName) return [];
          const id = this.idFromVolumes(instanceKey(instanceName), v, byName.get(`${instanceKey(instanceName)}.pods`));
          return id ? [{ instanceName, id }] : [];
        });
        if (found.length === 0) return of([]);
        return this.cli
          .containers()
          .pipe(
            map((containers) => found.map(({ instanceName, id }) => ({ instanceName, runtime: this.name, id, state: kubeWorkloadState(id.pods, containers) }))),
          );
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
      const pulls = kubeImagePulls(config);
      return concat(
        this.volume(`${instance}.config`, spec.runtimeConfig),
        // Pulls of its images already under way (it waited on its dependencies) are waited for, not done again:
        // before `started`, so that what a failed play made is told from what others made meanwhile.
        this.pulls.under(pulls),
        defer(() => {
          const started = this.cli.clock.now();
          return this.pulls.creating(pulls, this.cli.kubePlay(config.generalOptions, config.playOptions, manifest, createDeadlines(pulls, this.cli))).pipe(
            // What a failed play left behind goes, so that a retry starts clean: only pods it made, never one of
            // the manifest's names that was there before (another agent's or program's pod; `kube down` would take it).
            catchError((err: unknown) =>
              concat(
                quietly(this.removePodsMadeSince(config.generalOptions, podNames(manifest), started)),
                quietly(this.removeVolumes(instance)),
                throwError(() => err),
              ),
            ),
          );
        }).pipe(
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
    return this.cli.volumes([`name=${instance}`]).pipe(
      map((volumes) => {
        const byName = new Map(volumes.map((v) => [v.Name, v]));
        return this.idFromVolumes(instance, byName.get(`${instance}.config`), byName.get(`${instance}.pods`));
      }),
    );
  }

  /**
   * The pods' containers' states combined. With health checks on, the containers Podman gave a health
   * check (from their livenessProbe) are checked by the agent as podman workloads are: the workload is
   * Running(Ok) once all are healthy, and Failed once one is unhealthy (the control loop then stops the pods).
   */
  checkState(id: KubeId, spec: WorkloadSpec): Observable<ExecutionState> {
    const container$ = this.watch(kubeReading(id.pods));
    if (!this.health.on || !asksForHealthCheck(spec)) return container$;
    return this.probes(id.pods).pipe(
      catchError(() => of([])),
      switchMap((probes) =>
        probes.length === 0
          ? container$
          : withHealth(container$, () => probesHealth(this.cli, probes, this.health.podmanTimers), namedChecks(probes), this.cli.clock),
      ),
    );
  }

  stop(id: KubeId): Observable<void> {
    return id.pods.length === 0 ? EMPTY : this.cli.podStop(id.pods);
  }

  /** The containers of the pods that Podman gave a health check, with it. */
  private probes(pods: readonly string[]): Observable<Probe[]> {
    // No pod, no filter: `podman ps` would list the host's every container.
    if (pods.length === 0) return of([]);
    return this.cli.containers(pods.map((pod) => `pod=${pod}`)).pipe(
      map((containers) => containers.filter((c) => !c.isInfra)),
      switchMap((containers) =>
        containers.length === 0
          ? of([])
          : this.cli.healthChecksOf(containers.map((c) => c.id)).pipe(
              map((rows) =>
                rows.flatMap(({ id: containerId, json }): Probe[] => {
                  const check = healthCheckOfConfig(json);
                  const name = containers.find((c) => c.id === containerId)?.names?.[0] ?? containerId.slice(0, 12);
                  return check && containerId ? [{ id: containerId, name, check }] : [];
                }),
              ),
            ),
      ),
    );
  }

  /** swdd~podman-kube-delete-workload-downs-manifest-file~1, swdd~podman-kube-delete-removes-volumes~1 */
  deleteWorkload({ instance, manifest, downOptions }: KubeId): Observable<void> {
    return concat(this.cli.kubeDown(downOptions, manifest), this.removeVolumes(instance));
  }

  /** The logs of all containers of the workload's pods. */
  logs(id: KubeId, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return merge(...id.pods.map((pod) => this.cli.logs({ pod }, logArgs(options), paused$)));
  }

  /** The pods of these names that were made at `since` (ms since the epoch) or later, removed. */
  private removePodsMadeSince(generalOptions: readonly string[], names: readonly string[], since: number): Observable<never> {
    if (names.length === 0) return EMPTY;
    return this.cli.pods(generalOptions).pipe(
      switchMap((pods) => {
        const made = pods.filter((p) => names.some((n) => isPodNamed(p.Name, n)) && Date.parse(p.Created) >= since - 1);
        return made.length === 0
          ? EMPTY
          : this.cli.podRemove(
              generalOptions,
              made.map((p) => p.Id),
            );
      }),
      ignoreElements(),
    );
  }

  private volume(name: string, data: string): Observable<never> {
    return this.cli.volumeCreate(name, { data: toBase64(data) }).pipe(
      catchError((err: unknown) => {
        this.log?.warn(`Could not create the volume '${name}' (the workload runs, but is not found after an agent restart): ${String(err)}`);
        return EMPTY;
      }),
    );
  }

  private removeVolumes(instance: string): Observable<never> {
    return this.cli.volumeRemove([`${instance}.config`, `${instance}.pods`]);
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
