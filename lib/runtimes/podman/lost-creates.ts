// What a create cut short leaves outside Podman's list. Podman records a container (configured), then has its OCI
// runtime create it under conmon, then records it created: a create whose Podman (the service, or a CLI killed at
// its deadline) dies between the two leaves a record that says nothing runs, and `rm --force` of that record
// leaves conmon and the runtime's container (`runc init` waiting to start, or the workload's process) running,
// listed by no `podman ps`. Measured here: 2 of 20 creates, the service SIGKILLed twice during them. Such remains
// are found by conmon's arguments (the container's name and id) and removed by the OCI runtime itself.
import { EMPTY, type Observable, catchError, concat, defer, ignoreElements } from 'rxjs';
import { eachProcess } from '../../drivers/machine.js';
import type { PodmanCli } from './podman-cli.js';

/** A conmon of a container Podman does not list. */
export interface LostContainer {
  readonly conmonPid: number;
  readonly id: string;
  /** The OCI runtime conmon runs it with (`-r`): the one that can remove it. */
  readonly runtime: string;
}

/** How long the OCI runtime may take to kill and remove a container. */
const REMOVE_DEADLINE_MS = 30_000;

/** The value after `flag` in `argv`. */
const after = (argv: readonly string[], flag: string): string | undefined => {
  const at = argv.indexOf(flag);
  return at < 0 ? undefined : argv[at + 1];
};

/** The conmon processes of containers named `name` whose ids are not in `listed`, among `processes` (pid and cmdline). */
export function lostContainers(name: string, listed: ReadonlySet<string>, processes: Iterable<[number, Buffer]> = eachProcess('cmdline')): LostContainer[] {
  const lost: LostContainer[] = [];
  for (const [pid, cmdline] of processes) {
    const argv = cmdline.toString('latin1').split('\0');
    if (!argv[0]?.endsWith('conmon') || after(argv, '-n') !== name) continue;
    const id = after(argv, '-c');
    const runtime = after(argv, '-r');
    if (id && runtime && /^[0-9a-f]{64}$/.test(id) && !listed.has(id)) lost.push({ conmonPid: pid, id, runtime });
  }
  return lost;
}

/** Kills and removes each lost container by its OCI runtime (`delete --force`); conmon then ends by itself. */
export const removeLost = (cli: PodmanCli, lost: readonly LostContainer[]): Observable<never> =>
  concat(
    ...lost.map(({ id, runtime }) =>
      defer(() => cli.sibling(runtime, { query: REMOVE_DEADLINE_MS, command: REMOVE_DEADLINE_MS }).run(['delete', '--force', id])).pipe(
        ignoreElements(),
        catchError(() => EMPTY),
      ),
    ),
  );
