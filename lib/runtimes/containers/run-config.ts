// A container workload's runtime config (a YAML string in the workload), as the runtimes on a container CLI read
// it, and the `run` command made of it. Pure.
import { document, list, text } from '../base/run-config.js';

export interface ContainerConfig {
  readonly generalOptions: readonly string[];
  readonly commandOptions: readonly string[];
  readonly image: string;
  readonly commandArgs: readonly string[];
}

/**
 * Configs read lately, by their text: a workload's is read at its create, its state check and each restart,
 * and YAML is slow to read. Bounded to what a node runs at once (at most 256 of 16 KiB: 4 MiB); each update
 * brings a new text, so the memo fills to its bound and stays there (the soak's heap snapshots showed it).
 */
const recentlyRead = new Map<string, ContainerConfig>();
const MAX_REMEMBERED = 256;
const MAX_REMEMBERED_TEXT = 16 * 1024;

export function parseContainerConfig(runtimeConfig: string): ContainerConfig {
  const known = recentlyRead.get(runtimeConfig);
  if (known) return known;
  const config = readContainerConfig(runtimeConfig);
  if (runtimeConfig.length <= MAX_REMEMBERED_TEXT) {
    if (recentlyRead.size >= MAX_REMEMBERED) recentlyRead.delete(recentlyRead.keys().next().value!);
    recentlyRead.set(runtimeConfig, config);
  }
  return config;
}

function readContainerConfig(runtimeConfig: string): ContainerConfig {
  const doc = document(runtimeConfig);
  // Shared by every reader of the same text: nobody may change it.
  return Object.freeze({
    generalOptions: Object.freeze(list(doc, 'generalOptions')),
    commandOptions: Object.freeze(list(doc, 'commandOptions')),
    image: text(doc, 'image'),
    commandArgs: Object.freeze(list(doc, 'commandArgs')),
  });
}

export const CONTROL_INTERFACE_MOUNT_POINT = '/run/ankaios/control_interface';

export interface RunMounts {
  readonly controlInterfacePath?: string;
  readonly fileMounts?: ReadonlyArray<{ readonly hostPath: string; readonly mountPoint: string }>;
}

/** The container name the options choose, if any. */
export function nameOption(options: readonly string[]): string | undefined {
  for (let i = 0; i < options.length; i++) {
    if (options[i] === '--name') return options[i + 1];
    if (options[i].startsWith('--name=')) return options[i].slice('--name='.length);
  }
  return undefined;
}

/**
 * `podman [generalOptions] run --detach --name <instance> [commandOptions] [mounts]
 *  --label=name=<instance> --label=agent=<agent> <image> [commandArgs]`
 * (swdd~podman-create-workload-creates-labels~2, swdd~podman-create-workload-sets-optionally-container-name~2,
 * swdd~podman-create-workload-mounts-fifo-files~1).
 */
export function containerRunArgs(config: ContainerConfig, instanceName: string, agentName: string, mounts: RunMounts = {}): string[] {
  const name = nameOption(config.commandOptions) === undefined ? ['--name', instanceName] : [];
  const controlInterface = mounts.controlInterfacePath
    ? [`--mount=type=bind,source=${mounts.controlInterfacePath},destination=${CONTROL_INTERFACE_MOUNT_POINT}`]
    : [];
  const files = (mounts.fileMounts ?? []).map((f) => `--mount=type=bind,source=${f.hostPath},destination=${f.mountPoint},readonly=true`);
  return [
    ...config.generalOptions,
    'run',
    '--detach',
    ...name,
    ...config.commandOptions,
    ...controlInterface,
    ...files,
    `--label=name=${instanceName}`,
    `--label=agent=${agentName}`,
    config.image,
    ...config.commandArgs,
  ];
}
