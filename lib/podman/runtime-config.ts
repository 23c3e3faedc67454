// The runtime configs of the `podman` and `podman-kube` runtimes (YAML strings in the workload).
import { parse as parseYaml } from 'yaml';
import { ConfigurationError } from '../runtime-connector.js';

/** A runtime config the runtime cannot use; the message names the field. */
export class RuntimeConfigError extends ConfigurationError {}

export interface PodmanConfig {
  readonly generalOptions: readonly string[];
  readonly commandOptions: readonly string[];
  readonly image: string;
  readonly commandArgs: readonly string[];
}

export interface KubeConfig {
  readonly generalOptions: readonly string[];
  readonly playOptions: readonly string[];
  readonly downOptions: readonly string[];
  readonly manifest: string;
}

function document(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new RuntimeConfigError(`The runtime config is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new RuntimeConfigError('The runtime config must be a YAML mapping.');
  return doc as Record<string, unknown>;
}

function list(doc: Record<string, unknown>, field: string): string[] {
  const value = doc[field];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')) {
    throw new RuntimeConfigError(`The runtime config field '${field}' must be a list of strings.`);
  }
  return value.map(String);
}

function text(doc: Record<string, unknown>, field: string): string {
  const value = doc[field];
  if (value === undefined || value === null || value === '') throw new RuntimeConfigError(`The runtime config field '${field}' is missing.`);
  if (typeof value !== 'string') throw new RuntimeConfigError(`The runtime config field '${field}' must be a string.`);
  return value;
}

export function parsePodmanConfig(runtimeConfig: string): PodmanConfig {
  const doc = document(runtimeConfig);
  return {
    generalOptions: list(doc, 'generalOptions'),
    commandOptions: list(doc, 'commandOptions'),
    image: text(doc, 'image'),
    commandArgs: list(doc, 'commandArgs'),
  };
}

export function parseKubeConfig(runtimeConfig: string): KubeConfig {
  const doc = document(runtimeConfig);
  return {
    generalOptions: list(doc, 'generalOptions'),
    playOptions: list(doc, 'playOptions'),
    downOptions: list(doc, 'downOptions'),
    manifest: text(doc, 'manifest'),
  };
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
 * (swdd~podman-create-workload-creates-labels~1, swdd~podman-create-workload-sets-optionally-container-name~1,
 * swdd~podman-create-workload-mounts-fifo-files~1).
 */
export function podmanRunArgs(config: PodmanConfig, instanceName: string, agentName: string, mounts: RunMounts = {}): string[] {
  const name = nameOption(config.commandOptions) === undefined ? ['--name', instanceName] : [];
  const controlInterface = mounts.controlInterfacePath
    ? [`--mount=type=bind,source=${mounts.controlInterfacePath},destination=${CONTROL_INTERFACE_MOUNT_POINT}`]
    : [];
  const files = (mounts.fileMounts ?? []).map((f) => `--mount=type=bind,source=${f.hostPath},destination=${f.mountPoint},readonly=true`);
  return [
    ...config.generalOptions, 'run', '--detach', ...name, ...config.commandOptions, ...controlInterface, ...files,
    `--label=name=${instanceName}`, `--label=agent=${agentName}`, config.image, ...config.commandArgs,
  ];
}
