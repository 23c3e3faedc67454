// What a Podman call cut short leaves outside Podman's list. Podman records a container (configured), then has its
// OCI runtime create it under conmon, then records it created: a create whose Podman (the service, or a CLI killed
// at its deadline) dies between the two leaves a record that says nothing runs, and `rm --force` of that record
// leaves conmon and the runtime's container running, listed by no `podman ps` (measured: 2 of 20 creates, the
// service SIGKILLed twice during them). So can a remove made again by the CLI after its service was lost under it
// (measured: 7 of 20 deletes, the service stopped and replaced amid them).
//
// The agent runs as root and /proc is world-readable, so such remains are found only by what no other user can
// make: a process of the agent's own user whose executable (as the kernel links it) is the conmon Podman is
// configured with, running a container of the agent's own storage (its bundle under the storage's graph root).
// They are removed by the OCI runtime Podman is configured with, never by one a process names. All three are
// read from `podman info`.
import { EMPTY, type Observable, catchError, concat, defer, first, forkJoin, ignoreElements, map, mergeMap, shareReplay, take, tap, timer } from 'rxjs';
import { ownProcessesOf } from '../../drivers/machine.js';
import type { PodmanCli } from './podman-cli.js';

/** What Podman is configured with (`podman info`): the only conmon and OCI runtime the sweep trusts, and its storage. */
export interface PodmanSetup {
  readonly conmon: string;
  readonly ociRuntime: string;
  readonly graphRoot: string;
}

/** A conmon of a container Podman does not list. */
export interface LostContainer {
  readonly conmonPid: number;
  readonly id: string;
}

/** The lost containers looked for: by the name their create gave them, or by id (a container whose remove was made again). */
export type Wanted = { readonly name: string } | { readonly id: string };

/** How long the OCI runtime may take to kill and remove a container. */
const REMOVE_DEADLINE_MS = 30_000;
/** How long conmon may take to leave once its container is gone, and how often that is looked at. */
const CONMON_GONE = { withinMs: 10_000, everyMs: 50 };
const CONTAINER_ID = /^[0-9a-f]{64}$/;

/** The value after `flag` in `argv`. */
const after = (argv: readonly string[], flag: string): string | undefined => {
  const at = argv.indexOf(flag);
  return at < 0 ? undefined : argv[at + 1];
};

/** `podman info --format=json` read for the sweep; undefined when it lacks a part. */
export function parseSetup(text: string): PodmanSetup | undefined {
  try {
    const info = JSON.parse(text) as { host?: { conmon?: { path?: unknown }; ociRuntime?: { path?: unknown } }; store?: { graphRoot?: unknown } };
    const [conmon, ociRuntime, graphRoot] = [info.host?.conmon?.path, info.host?.ociRuntime?.path, info.store?.graphRoot];
    const absolute = (p: unknown): p is string => typeof p === 'string' && p.startsWith('/');
    return absolute(conmon) && absolute(ociRuntime) && absolute(graphRoot) ? { conmon, ociRuntime, graphRoot: graphRoot.replace(/\/+$/, '') } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Among `conmons` (the processes of the agent's own user running Podman's conmon, with their argv), those of
 * containers `wanted` names in the storage of `setup` whose ids are not in `listed`.
 */
export function lostContainers(
  wanted: Wanted,
  listed: ReadonlySet<string>,
  setup: PodmanSetup,
  conmons: Iterable<{ readonly pid: number; readonly argv: readonly string[] }>,
): LostContainer[] {
  const lost: LostContainer[] = [];
  for (const { pid, argv } of conmons) {
    const id = after(argv, '-c');
    if (!id || !CONTAINER_ID.test(id) || listed.has(id)) continue;
    if ('name' in wanted ? after(argv, '-n') !== wanted.name : id !== wanted.id) continue;
    if (!inStorage(after(argv, '-b'), id, setup.graphRoot)) continue;
    lost.push({ conmonPid: pid, id });
  }
  return lost;
}

/** Whether a container's bundle is its folder in the storage at `graphRoot` (`<graphRoot>/<driver>-containers/<id>/userdata`). */
function inStorage(bundle: string | undefined, id: string, graphRoot: string): boolean {
  if (!bundle?.startsWith(`${graphRoot}/`)) return false;
  const [driverFolder, ...rest] = bundle.slice(graphRoot.length + 1).split('/');
  return /^[a-z0-9_]+-containers$/.test(driverFolder) && rest.join('/') === `${id}/userdata`;
}

/** The lost containers `wanted` names, read from the processes now. */
export const findLost = (wanted: Wanted, listed: ReadonlySet<string>, setup: PodmanSetup): LostContainer[] =>
  lostContainers(wanted, listed, setup, ownProcessesOf(setup.conmon));

/**
 * Kills and removes each lost container by the configured OCI runtime (`delete --force`), then waits for its conmon
 * to leave; one that stays is killed.
 */
export const removeLost = (cli: PodmanCli, setup: PodmanSetup, lost: readonly LostContainer[]): Observable<never> =>
  concat(
    ...lost.map(({ id, conmonPid }) =>
      concat(defer(() => cli.ociDelete(setup.ociRuntime, id, REMOVE_DEADLINE_MS)).pipe(catchError(() => EMPTY)), conmonGone(setup, id, conmonPid)),
    ),
  );

/** Completes once the conmon of container `id` has left; one still there after CONMON_GONE.withinMs is killed. */
function conmonGone(setup: PodmanSetup, id: string, conmonPid: number): Observable<never> {
  const stays = () => findLost({ id }, NONE, setup).some((l) => l.conmonPid === conmonPid);
  return timer(0, CONMON_GONE.everyMs).pipe(
    take(Math.ceil(CONMON_GONE.withinMs / CONMON_GONE.everyMs) + 1),
    first(() => !stays(), 'stayed' as const),
    tap((outcome) => outcome === 'stayed' && killQuietly(conmonPid)),
    ignoreElements(),
  );
}

const NONE: ReadonlySet<string> = new Set();

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone meanwhile.
  }
}

/**
 * The sweep of one Podman: what Podman is configured with is asked once (locally, `podman info`), then each sweep
 * lists what Podman holds and removes what it does not. A sweep never fails: it is the clean-up after a failure.
 */
export class LostContainerSweep {
  private setup$?: Observable<PodmanSetup | undefined>;

  constructor(private readonly cli: PodmanCli) {}

  /** Removes the containers `wanted` names that run outside Podman's list, and waits until their processes are gone. */
  sweep(wanted: Wanted): Observable<never> {
    const listed$ = this.cli.containers('id' in wanted ? [`id=${wanted.id}`] : [`name=^${wanted.name}$`]);
    return forkJoin([this.setup(), listed$]).pipe(
      mergeMap(([setup, listed]) => (setup ? removeLost(this.cli, setup, findLost(wanted, new Set(listed.map((c) => c.id)), setup)) : EMPTY)),
      catchError(() => EMPTY),
    );
  }

  private setup(): Observable<PodmanSetup | undefined> {
    this.setup$ ??= this.cli.info().pipe(map(parseSetup), tap({ error: () => (this.setup$ = undefined) }), shareReplay(1));
    return this.setup$;
  }
}
