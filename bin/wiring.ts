// How the drivers and the pipelines are put together, for the agent and for the specs and benchmarks
// that run it on real parts.
import { EMPTY } from 'rxjs';
import { PodmanCli } from '../lib/drivers/podman-cli.js';
import { containerDeaths, podmanRuntimes } from '../lib/drivers/podman-runtime.js';
import type { Logger } from '../lib/logger.js';
import type { RuntimeConnector } from '../lib/runtime-connector.js';
import { containerCache } from '../streams/container-cache.js';
import { stateChecker } from '../streams/state-checker.js';

/** `podman` and `podman-kube` on one CLI, one container-state cache (refreshed on `podman events` unless off) and one state checker. */
export function builtInRuntimes(log: Logger, cli = new PodmanCli({ log }), { events = true } = {}): Map<string, RuntimeConnector> {
  const cache = containerCache(() => cli.listContainers(), events ? containerDeaths(cli) : EMPTY);
  return podmanRuntimes(cli, stateChecker(cache), log);
}
