// The built-in runtimes: `podman` and `podman-kube`, sharing one Podman CLI and one state cache.
import type { Logger } from '../logger.js';
import type { RuntimeConnector } from '../runtime-connector.js';
import { containerCache } from '../../streams/container-cache.js';
import { PodmanCli } from './podman-cli.js';
import { PodmanKubeRuntime, PodmanRuntime } from './podman-runtime.js';

/** swdd~agent-supports-multiple-runtime-connectors~1 */
export function builtInRuntimes(log: Logger, cli = new PodmanCli()): Map<string, RuntimeConnector> {
  const cache = containerCache(() => cli.listContainers());
  return new Map<string, RuntimeConnector>([
    ['podman', new PodmanRuntime(cli, cache)],
    ['podman-kube', new PodmanKubeRuntime(cli, cache, log)],
  ]);
}
