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
} from 'rxjs';
import type { Container } from '../../ports.js';
import { type Attempt, type Call, type CallKind, type Cli, CliError, DEFAULT_MAX_PROCESSES } from '../base/cli.js';
import { Slots } from '../base/slots.js';
import { AnswerCut, type FiguresRow, Libpod, type PodmanRow, RouteLost } from './libpod.js';
import type { PodmanService } from './service.js';
import type { ImagePull } from '../containers/images.js';
import { tolerateMissing } from '../containers/cli-steps.js';
import { notThere } from '../containers/image-pulls.js';

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

  constructor(
    /** The CLI, run locally. */
    readonly cli: Cli,
    /** A running service to ask where it is up; without one every call is the local CLI's. */
    private readonly service?: PodmanService,
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

  /** How many processes of Podman's CLI the agent started. */
  get calls(): number {
    return this.cli.calls;
  }

  /** `podman <args>`, through the service where the remote client can make it (Cli.run). */
  run(args: readonly string[], call: Call = {}): Observable<string> {
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
  imageExists(pull: ImagePull): Observable<boolean> {
    return this.either(
      pull.present,
      'query',
      (api, deadline) => api.imageExists(pull.image, deadline),
      () => true,
    ).pipe(catchError(notThere));
  }

  lines(args: readonly string[], paused$?: Observable<boolean>, maxLineBytes?: number): Observable<string> {
    return this.cli.lines(args, paused$, maxLineBytes);
  }

  attempt(args: readonly string[], timeoutMs: number, keepBytes: number, via?: string): Observable<Attempt> {
    return this.cli.attempt(args, timeoutMs, keepBytes, via);
  }

  sibling(binary: string, deadlines?: { readonly query: number; readonly command: number }): Cli {
    return this.cli.sibling(binary, deadlines);
  }

  deadlineOf(kind: CallKind): number {
    return this.cli.deadlineOf(kind);
  }

  /** An action on one container by the API, "no such container" in Podman's words as its CLI says them. */
  private acted(action: 'remove' | 'stop' | 'start', cliArgs: readonly string[], id: string): Observable<string> {
    const byApi = async (api: Libpod, deadlineMs: number) => {
      if (await api.act(action, id, deadlineMs)) return id;
      throw new CliError(`no container with name or ID "${id}" found: no such container`, 125);
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
            const started = performance.now();
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
  private lostAgain<T>(service: PodmanService, through$: Observable<T>, again: () => Observable<T>): Observable<T> {
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

/** A row of Podman's list as the container cache holds it. */
const asContainer = (r: PodmanRow): Container => ({
  id: r.Id,
  names: r.Names,
  state: r.State,
  exitCode: r.ExitCode,
  labels: r.Labels,
  pod: r.Pod,
  isInfra: r.IsInfra,
  image: r.Image,
  imageId: r.ImageID,
});

/** A list Podman printed; one that cannot be read is an error of the call, never an empty list. */
function parseJsonList<T>(text: string): T[] {
  if (text.trim() === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`Podman's list is not JSON: ${JSON.stringify(text.slice(0, 80))}`);
  }
  if (parsed !== null && !Array.isArray(parsed)) throw new Error(`Podman's list is not a list: ${JSON.stringify(text.slice(0, 80))}`);
  return (parsed as T[] | null) ?? [];
}
