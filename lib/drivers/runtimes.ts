// The built-in runtimes: `podman` and `podman-kube`, sharing one Podman CLI and one state cache.
import type { Logger } from '../logger.js';
import type { RuntimeConnector } from '../runtime-connector.js';
import { containerCache } from '../../streams/container-cache.js';
import { EMPTY, Observable, catchError, repeat, timer } from 'rxjs';
import { PodmanCli } from './podman-cli.js';
import { PodmanKubeRuntime, PodmanRuntime } from './podman-runtime.js';

/** swdd~agent-supports-multiple-runtime-connectors~1 */
export function builtInRuntimes(log: Logger, cli = new PodmanCli(), { events = true } = {}): Map<string, RuntimeConnector> {
  const cache = containerCache(() => cli.listContainers(), undefined, events ? containerDeaths(cli) : EMPTY);
  return new Map<string, RuntimeConnector>([
    ['podman', new PodmanRuntime(cli, cache)],
    ['podman-kube', new PodmanKubeRuntime(cli, cache, log)],
  ]);
}

/**
 * One line per container that died, was cleaned up (its state is `exited` from then on) or was removed,
 * from one long-running `podman events` (no periodic calls): lets the state cache notice an exit at
 * once. Restarted after a second if it ends.
 */
export function containerDeaths(cli: PodmanCli): Observable<string> {
  return cli.lines(['events', '--filter', 'event=died', '--filter', 'event=cleanup', '--filter', 'event=remove', '--format', '{{.ID}}']).pipe(
    catchError(() => EMPTY),
    repeat({ delay: () => timer(1000) }),
  );
}
