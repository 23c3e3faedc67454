// The runtime configs of the `podman` and `podman-kube` runtimes (YAML strings in the workload).
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { ConfigurationError } from '../../runtime-connector.js';
import { isRecord } from '../../record.js';

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
  /** `<pod>/<container>`: where the workload's Control Interface is mounted. */
  readonly controlInterfaceTarget?: string;
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

/**
 * Configs read lately, by their text: a workload's is read at its create, its state check and each restart,
 * and YAML is slow to read. Bounded to what a node runs at once (at most 256 of 16 KiB: 4 MiB); each update
 * brings a new text, so the memo fills to its bound and stays there (the soak's heap snapshots showed it).
 */
const recentlyRead = new Map<string, PodmanConfig>();
const MAX_REMEMBERED = 256;
const MAX_REMEMBERED_TEXT = 16 * 1024;

export function parsePodmanConfig(runtimeConfig: string): PodmanConfig {
  const known = recentlyRead.get(runtimeConfig);
  if (known) return known;
  const config = readPodmanConfig(runtimeConfig);
  if (runtimeConfig.length <= MAX_REMEMBERED_TEXT) {
    if (recentlyRead.size >= MAX_REMEMBERED) recentlyRead.delete(recentlyRead.keys().next().value!);
    recentlyRead.set(runtimeConfig, config);
  }
  return config;
}

function readPodmanConfig(runtimeConfig: string): PodmanConfig {
  const doc = document(runtimeConfig);
  // Shared by every reader of the same text: nobody may change it.
  return Object.freeze({
    generalOptions: Object.freeze(list(doc, 'generalOptions')),
    commandOptions: Object.freeze(list(doc, 'commandOptions')),
    image: text(doc, 'image'),
    commandArgs: Object.freeze(list(doc, 'commandArgs')),
  });
}

export function parseKubeConfig(runtimeConfig: string): KubeConfig {
  const doc = document(runtimeConfig);
  return {
    generalOptions: list(doc, 'generalOptions'),
    playOptions: list(doc, 'playOptions'),
    downOptions: list(doc, 'downOptions'),
    manifest: text(doc, 'manifest'),
    controlInterfaceTarget: doc.controlInterfaceTarget === undefined ? undefined : text(doc, 'controlInterfaceTarget'),
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
 * (swdd~podman-create-workload-creates-labels~2, swdd~podman-create-workload-sets-optionally-container-name~2,
 * swdd~podman-create-workload-mounts-fifo-files~1).
 */
export function podmanRunArgs(config: PodmanConfig, instanceName: string, agentName: string, mounts: RunMounts = {}): string[] {
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

/** The released agent's words when a podman-kube workload with Control Interface access names no target. */
export const NO_CONTROL_INTERFACE_TARGET = 'Control interface target not specified in runtime config.';
/** swdd~podman-kube-injects-control-interface-volume~1: the volume's name, as the released agent names it. */
export const CONTROL_INTERFACE_VOLUME = 'control-interface-volume';

type Node = Record<string, unknown>;
function listIn(node: Node, key: string): unknown[] {
  if (!Array.isArray(node[key])) node[key] = [];
  return node[key] as unknown[];
}

/** The pod a manifest document makes, as Podman names it: a Pod by its name, a Deployment `<name>-pod`. */
export function podOf(doc: Node): { readonly name: string; readonly spec: unknown } | undefined {
  const name = isRecord(doc.metadata) ? doc.metadata.name : undefined;
  if (typeof name !== 'string') return undefined;
  if (doc.kind === 'Pod') return { name, spec: doc.spec };
  if (doc.kind === 'Deployment') return { name: `${name}-pod`, spec: isRecord(doc.spec) && isRecord(doc.spec.template) ? doc.spec.template.spec : undefined };
  return undefined;
}

/** The names of the pods a manifest makes (none of a document that cannot be read). */
export function podNames(manifest: string): string[] {
  return parseAllDocuments(manifest).flatMap((document) => {
    try {
      const doc: unknown = document.errors.length === 0 ? document.toJS() : undefined;
      const pod = isRecord(doc) ? podOf(doc) : undefined;
      return pod ? [pod.name] : [];
    } catch {
      return [];
    }
  });
}

/** Whether Podman's pod `actual` is the pod a manifest names `named` (Podman 4.3 names a Deployment's pod `<name>-pod-0`). */
export const isPodNamed = (actual: string, named: string): boolean =>
  actual === named || (actual.startsWith(`${named}-`) && /^\d+$/.test(actual.slice(named.length + 1)));

/**
 * swdd~podman-kube-mounts-control-interface~2, swdd~podman-kube-validates-target-path-format~1,
 * swdd~podman-kube-injects-control-interface-volume-mount~1: the Kubernetes manifest with the workload's
 * Control Interface folder mounted at /run/ankaios/control_interface in the container `target`
 * (`<pod>/<container>`) names; the pod is a Pod of that name or a Deployment whose pod Podman names so.
 */
export function withControlInterface(manifest: string, target: string | undefined, hostPath: string): string {
  if (target === undefined) throw new RuntimeConfigError(NO_CONTROL_INTERFACE_TARGET);
  const [podName, containerName, ...rest] = target.split('/');
  if (!podName || !containerName || rest.length > 0) {
    throw new RuntimeConfigError(`Invalid control interface target format: '${target}'. Expected format: '<pod_name>/<container_name>'`);
  }
  const documents = parseAllDocuments(manifest);
  for (const document of documents) {
    const doc: unknown = document.toJS();
    const pod = isRecord(doc) ? podOf(doc) : undefined;
    if (!pod || pod.name !== podName) continue;
    const container = isRecord(pod.spec) ? listIn(pod.spec, 'containers').find((c) => isRecord(c) && c.name === containerName) : undefined;
    if (!isRecord(pod.spec) || !isRecord(container))
      throw new RuntimeConfigError(`Cannot add Control Interface. Target container '${containerName}' not found.`);
    listIn(pod.spec, 'volumes').push({ name: CONTROL_INTERFACE_VOLUME, hostPath: { path: hostPath, type: 'Directory' } });
    listIn(container, 'volumeMounts').push({ name: CONTROL_INTERFACE_VOLUME, mountPath: CONTROL_INTERFACE_MOUNT_POINT });
    document.contents = document.createNode(doc) as typeof document.contents;
    return documents.map((d) => d.toString()).join('');
  }
  throw new RuntimeConfigError(`Cannot add Control Interface. Target pod not found '${podName}'`);
}
