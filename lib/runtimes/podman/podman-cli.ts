// The agent's one client of Podman: what it asks most (its containers, their figures, a container removed,
// stopped or started, whether an image is there) by the libpod API of a running service where one is up
// (./libpod.ts), the rest by the CLI: `run` and `kube play` with the workload's options as given, by the remote
// client through the service; `exec` and what the remote client cannot do by the local CLI, and so every call
// while the service is starting, gone or stalled (./service.ts). A call whose way is lost under it is made again
// by the local CLI. The event stream and conmon's exit files stay local: they are the source of states.
import {
  EMPTY,
  type Observable,
  catchError,
  defer,
  exhaustMap,
  first,
  ignoreElements,
  of,
  from,
  interval,
  map,
  merge,
  mergeMap,
  race,
  share,
  tap,
  throwError,
  timeout,
  type TimestampProvider,
} from 'rxjs';
import type { Container } from '../../ports.js';
import { type Attempt, type Call, type CallKind, type Cli, CliError, DEFAULT_MAX_PROCESSES, NotFound } from '../base/cli.js';
import { Slots } from '../base/slots.js';
import { AnswerCut, type FiguresRow, Libpod, type PodmanRow, RouteLost, asContainer, parseJsonList } from './libpod.js';
import type { ImagePull } from '../containers/images.js';
import { type ContainerConfig, type RunMounts, containerRunArgs } from '../containers/run-config.js';
import { tolerateMissing } from '../containers/cli-steps.js';
import { notThere } from '../containers/image-pulls.js';

/** How a call goes through the service: by the remote client with these args, or by the local CLI and why. */
export type Plan = { readonly via: 'service'; readonly args: readonly string[]; readonly progressPid?: number } | { readonly via: 'cli'; readonly why: string };

/** The service as the client's calls find their way through it (./service.ts's PodmanService). */
export interface ServiceWay {
  /** Tells why, each time the service goes down. */
  readonly down$: Observable<string>;
  alive(withinMs: number): Promise<boolean>;
  reach(): { readonly socket: string; readonly pid?: number } | { readonly why: string };
  plan(args: readonly string[]): Plan;
  lost(message: string): boolean;
  answered(): void;
  failed(why: string, broken?: boolean): void;
}

export interface PodRow {
  readonly Id: string;
  readonly Name: string;
  readonly Created: string;
}

export interface Volume {
  readonly Name: string;
  readonly Labels?: Readonly<Record<string, string>> | null;
}

/** How often a call through the service still running asks whether the service answers (a stalled one ends it at once, not at its deadline). */
const PROBE_MS = 2000;

export class PodmanCli {
  /** The API's requests that run at once, as the CLI's processes. */
  private readonly requests = new Slots(DEFAULT_MAX_PROCESSES);
  /** The API of the service's socket, its connections kept for a burst. */
  private api?: Libpod;
  /**
   * Fails with a RouteLost once the service stops answering its ping (one ping every PROBE_MS however many calls
   * go through the service: a burst's calls waiting for a slot asked a ping each) or goes down for another reason.
   */
  private readonly lost$: Observable<never>;
  /**
   * How many calls lost their way to the service under them so far: a call made again by the CLI then may find
   * half of what the first did (a container whose record went while its processes run on).
   */
  lostWays = 0;

  /** The run's clock (ms), as the CLI's. */
  get clock(): TimestampProvider {
    return this.cli.clock;
  }

  constructor(
    /** The CLI, run locally. */
    readonly cli: Cli,
    /** A running service to ask where it is up; without one every call is the local CLI's. */
    private readonly service?: ServiceWay,
  ) {
    const silent$ = interval(PROBE_MS).pipe(
      exhaustMap(() => service?.alive(PROBE_MS / 2) ?? [true]),
      first((alive) => !alive),
      map(() => `the service did not answer within ${PROBE_MS / 2000} s`),
    );
    this.lost$ = merge(silent$, service?.down$ ?? EMPTY).pipe(
      first(),
      mergeMap((why) => throwError(() => new RouteLost(why))),
      share(),
    );
  }

  /** Lets go of the connections to the service kept open (the run is over). */
  dispose(): void {
    this.api?.dispose();
    this.api = undefined;
  }

  /** How many processes of Podman's CLI the agent started. */
  get calls(): number {
    return this.cli.calls;
  }

  /** `podman <args>`, through the service where the remote client can make it (Cli.run). */
  private run(args: readonly string[], call: Call = {}): Observable<string> {
    const service = this.service;
    if (!service) return this.cli.run(args, call);
    return defer(() => {
      const plan = service.plan(args);
      if (plan.via === 'cli') return this.cli.run(args, { ...call, via: `CLI (${plan.why})` });
      return this.lostAgain(service, this.cli.run(plan.args, { ...call, via: 'service', progressPid: call.progressPid ?? plan.progressPid, asked: args }), () =>
        this.cli.run(args, { ...call, via: 'CLI (the service was lost)' }),
      );
    });
  }

  /** Every container (of the storage `generalOptions` choose), or those `filters` choose, as the cache holds them. */
  containers(filters: readonly string[] = [], generalOptions: readonly string[] = []): Observable<Container[]> {
    const cliArgs = [...generalOptions, 'ps', '--all', '--format=json', ...filters.map((f) => `--filter=${f}`)];
    return this.either(
      cliArgs,
      'query',
      (api, deadline) => api.containers(filters, deadline),
      (text) => parseJsonList<PodmanRow>(text),
    ).pipe(map((rows) => rows.map(asContainer)));
  }

  /** Podman's volumes, or those `filters` choose (by the CLI: the agent asks for them seldom). */
  volumes(filters: readonly string[] = []): Observable<Volume[]> {
    return this.cli.run(['volume', 'ls', '--format=json', ...filters.map((f) => `--filter=${f}`)], { kind: 'query' }).pipe(map(parseJsonList<Volume>));
  }

  /** The figures of every running container. */
  figures(): Observable<FiguresRow[]> {
    return this.either(
      ['stats', '--no-stream', '--format', '{{json .ContainerStats}}'],
      'query',
      (api, deadline) => api.figures(deadline),
      (text) =>
        text
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as FiguresRow),
    );
  }

  /** A container removed (stopped first, as `podman stop` does); one already gone counts as removed. */
  remove(id: string): Observable<never> {
    return tolerateMissing(this.acted('remove', ['rm', '--force', id], id));
  }

  /** A container stopped; one already gone counts as stopped. */
  stop(id: string): Observable<never> {
    return tolerateMissing(this.acted('stop', ['stop', id], id));
  }

  /** A stopped container started again (in the storage `generalOptions` choose). */
  start(id: string, generalOptions: readonly string[] = []): Observable<unknown> {
    return this.acted('start', [...generalOptions, 'start', id], id);
  }

  /** Whether the image a pull would fetch is there (in the pull's storage). */
  present(pull: ImagePull): Observable<boolean> {
    return this.either(
      pull.present,
      'query',
      (api, deadline) => api.imageExists(pull.image, deadline),
      () => true,
    ).pipe(catchError(notThere));
  }

  // What only the CLI does: typed requests, the argv made here alone.

  /** `podman run` of a workload's container config (its options as given) under its instance's name and labels; its id. */
  runContainer(config: ContainerConfig, instance: string, agentName: string, mounts: RunMounts, call: Call): Observable<string> {
    return this.run(containerRunArgs(config, instance, agentName, mounts), call).pipe(map((stdout) => stdout.trim().split('\n').at(-1)!));
  }

  /** An image pulled as its workload's options ask (`pull --quiet`: it prints the image's id). */
  pull(pull: ImagePull, call: Call): Observable<string> {
    return this.run(pull.args, call);
  }

  /** The page cache written to disk (`sync`): what a pull left there. */
  flush(deadlineMs: number): Observable<string> {
    return this.cli.sibling('sync', { query: deadlineMs, command: deadlineMs }).run([]);
  }

  /** `kube play` of a manifest (the workload's general and play options as given). */
  kubePlay(generalOptions: readonly string[], playOptions: readonly string[], manifest: string, call: Call): Observable<string> {
    return this.run([...generalOptions, 'kube', 'play', '--quiet', ...playOptions, '-'], { ...call, input: manifest });
  }

  /** `kube down` of a manifest: its pods stopped and removed. */
  kubeDown(downOptions: readonly string[], manifest: string): Observable<never> {
    return this.run(['kube', 'down', ...downOptions, '-'], { input: manifest }).pipe(ignoreElements());
  }

  /** These pods stopped (kept); pods already gone count as stopped. */
  podStop(pods: readonly string[]): Observable<never> {
    return tolerateMissing(this.run(['pod', 'stop', ...pods]));
  }

  /** The pods of the storage `generalOptions` choose. */
  pods(generalOptions: readonly string[]): Observable<PodRow[]> {
    return this.run([...generalOptions, 'pod', 'ps', '--format', 'json'], { kind: 'query' }).pipe(map(parseJsonList<PodRow>));
  }

  /** These pods removed, their containers with them. */
  podRemove(generalOptions: readonly string[], ids: readonly string[]): Observable<never> {
    return this.run([...generalOptions, 'pod', 'rm', '--force', ...ids]).pipe(ignoreElements());
  }

  /** A volume made with these labels. */
  volumeCreate(name: string, labels: Readonly<Record<string, string>>): Observable<never> {
    return this.run(['volume', 'create', ...Object.entries(labels).map(([k, v]) => `--label=${k}=${v}`), name]).pipe(ignoreElements());
  }

  /** These volumes removed; those already gone count as removed. */
  volumeRemove(names: readonly string[]): Observable<never> {
    return tolerateMissing(this.run(['volume', 'rm', '--force', ...names]));
  }

  /** Each container's health check as Podman holds it (its `.Config.Healthcheck`, as JSON), by id. */
  healthChecksOf(ids: readonly string[]): Observable<Array<{ readonly id: string; readonly json: string }>> {
    return this.run(['inspect', '--format', '{{.Id}} {{json .Config.Healthcheck}}', ...ids], { kind: 'query' }).pipe(
      map((out) => out.split('\n').map((line) => ({ id: line.slice(0, line.indexOf(' ')), json: line.slice(line.indexOf(' ') + 1) }))),
    );
  }

  /** The health Podman's own checks left on a container (its `.State.Health`, as JSON). */
  healthState(id: string): Observable<string> {
    return this.run(['inspect', '--format', '{{json .State.Health}}', id], { kind: 'query' });
  }

  /** `argv` run in a running container with `env` set, by the local CLI (exec has no remote way here), kept to `keepBytes`. */
  exec(container: string, env: string, argv: readonly string[], timeoutMs: number, keepBytes: number, via: string): Observable<Attempt> {
    return this.cli.attempt(['exec', '--env', env, container, ...argv], timeoutMs, keepBytes, via);
  }

  /** A container's log lines (`logs`), or a pod's (`pod logs`). */
  logs(of: { readonly container: string } | { readonly pod: string }, options: readonly string[], paused$?: Observable<boolean>): Observable<string> {
    return this.cli.lines('pod' in of ? ['pod', 'logs', ...options, of.pod] : ['logs', ...options, of.container], paused$);
  }

  /** Podman's container events of the statuses given (all when none), a JSON object a line, as they happen. */
  containerEvents(statuses: readonly string[]): Observable<string> {
    return this.cli.lines(['events', '--format', 'json', '--filter', 'type=container', ...statuses.flatMap((s) => ['--filter', `event=${s}`])]);
  }

  /** An image's id and names in the storage `storage` chooses; undefined when it is not there. */
  imageInspect(storage: readonly string[], image: string): Observable<string | undefined> {
    return this.run([...storage, 'image', 'inspect', '--format', '{{.Id}} {{json .RepoTags}}', '--', image], { kind: 'query' }).pipe(
      catchError((err: unknown) => (err instanceof CliError && /image not known/.test(err.message) ? of(undefined) : throwError(() => err))),
    );
  }

  /** An image removed by its id, without force: Podman refuses one a container uses, or one with other names. */
  rmi(storage: readonly string[], id: string): Observable<string> {
    return this.run([...storage, 'rmi', id]);
  }

  tag(storage: readonly string[], image: string, name: string): Observable<string> {
    return this.run([...storage, 'tag', image, name]);
  }

  /** The name taken off its image. */
  untag(storage: readonly string[], name: string): Observable<string> {
    return this.run([...storage, 'untag', name, name]);
  }

  /** The names of the images pulled since `since` (every pull, a run's or another user's too, as Podman logs it). */
  imagePullsSince(storage: readonly string[], since: Date): Observable<string[]> {
    const args = ['events', '--stream=false', '--since', since.toISOString(), '--filter', 'type=image', '--filter', 'event=pull', '--format', '{{.Name}}'];
    return this.run([...storage, ...args], { kind: 'query' }).pipe(map((text) => text.split('\n').map((name) => name.trim())));
  }

  /** Where the storage `storage` chooses keeps its images. */
  graphRoot(storage: readonly string[]): Observable<string> {
    return this.run([...storage, 'info', '--format', '{{.Store.GraphRoot}}'], { kind: 'query' }).pipe(map((text) => text.trim()));
  }

  /** Podman's own description of itself (`info`, as JSON), by the local CLI. */
  info(): Observable<string> {
    return this.cli.run(['info', '--format=json'], { kind: 'query' });
  }

  /** A container killed and removed by the OCI runtime itself (`<runtime> delete --force`), past Podman. */
  ociDelete(ociRuntime: string, id: string, deadlineMs: number): Observable<never> {
    return this.cli.sibling(ociRuntime, { query: deadlineMs, command: deadlineMs }).run(['delete', '--force', id]).pipe(ignoreElements());
  }

  deadlineOf(kind: CallKind): number {
    return this.cli.deadlineOf(kind);
  }

  /** An action on one container by the API: a container that is not there is a NotFound, as by the CLI. */
  private acted(action: 'remove' | 'stop' | 'start', cliArgs: readonly string[], id: string): Observable<string> {
    const byApi = async (api: Libpod, deadlineMs: number) => {
      if (await api.act(action, id, deadlineMs)) return id;
      throw new NotFound(`no container with name or ID "${id}" found`);
    };
    return this.either(cliArgs, 'command', byApi, (text) => text);
  }

  /** The API on `socket`: the one kept, unless the service now listens elsewhere. */
  private apiAt(socket: string): Libpod {
    if (this.api?.socket !== socket) {
      this.api?.dispose();
      this.api = new Libpod(socket);
    }
    return this.api;
  }

  /**
   * A call by the API where the service is up and the call's storage is the service's (no general options),
   * else by the CLI (its output read by `read`); a way lost under the API's call is taken by the CLI again.
   */
  private either<T>(
    cliArgs: readonly string[],
    kind: CallKind,
    byApi: (api: Libpod, deadlineMs: number) => Promise<T>,
    read: (text: string) => T,
  ): Observable<T> {
    const byCli = (via?: string) => this.cli.run(cliArgs, { kind, via }).pipe(map(read));
    const service = this.service;
    if (!service) return byCli();
    return defer(() => {
      const reach = service.reach();
      if ('why' in reach) return byCli(`CLI (${reach.why})`);
      if (cliArgs[0].startsWith('-')) return byCli('CLI (general options choose the storage)');
      const deadlineMs = this.cli.deadlineOf(kind);
      const asked = this.requests
        .run(
          defer(() => {
            const started = this.clock.now();
            const told = (outcome: 'ok' | 'failed') => () => this.cli.tell(cliArgs, outcome, started, 'service (REST)');
            return from(byApi(this.apiAt(reach.socket), deadlineMs)).pipe(tap({ next: told('ok'), error: told('failed') }));
          }),
        )
        // The deadline covers the wait for a slot too: calls that hold every slot never hold the next for longer.
        .pipe(timeout({ first: deadlineMs, with: () => throwError(() => new RouteLost(`no answer within ${deadlineMs / 1000} s, a slot's wait included`)) }));
      return this.lostAgain(service, asked, () => byCli('CLI (the service was lost)'));
    });
  }

  /**
   * A call through the service, ended as lost when the service stops answering meanwhile or its failure says the
   * way went (not the engine's answer): the service hears of it, and `again` makes the call locally.
   */
  private lostAgain<T>(service: ServiceWay, through$: Observable<T>, again: () => Observable<T>): Observable<T> {
    return race(through$.pipe(tap(() => service.answered())), this.lost$).pipe(
      catchError((err: unknown) => {
        const lost = err instanceof RouteLost || (err instanceof CliError && service.lost(err.message));
        if (!lost) return throwError(() => err);
        this.lostWays += 1;
        service.failed((err as Error).message, err instanceof AnswerCut);
        return again().pipe(
          catchError((after: unknown) => {
            if (after instanceof CliError) after.retried = true;
            return throwError(() => after);
          }),
        );
      }),
    );
  }
}

/** `podman system service` on `socket`, living on its own until it has been idle for `idleS` seconds. */
export const serviceProcess = (cli: Pick<Cli, 'background'>, socket: string, idleS: number, ended: Parameters<Cli['background']>[1]) =>
  cli.background(['system', 'service', `--time=${idleS}`, `unix://${socket}`], ended);
