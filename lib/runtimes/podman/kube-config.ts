// The runtime config of the `podman-kube` runtime (a YAML string in the workload) and what its manifest says. Pure.
import { parseAllDocuments } from 'yaml';
import { isRecord } from '../../record.js';
import { RuntimeConfigError, document, list, text } from '../base/run-config.js';
import { CONTROL_INTERFACE_MOUNT_POINT } from '../containers/run-config.js';

export interface KubeConfig {
  readonly generalOptions: readonly string[];
  readonly playOptions: readonly string[];
  readonly downOptions: readonly string[];
  readonly manifest: string;
  /** `<pod>/<container>`: where the workload's Control Interface is mounted. */
  readonly controlInterfaceTarget?: string;
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

/** How many containers of the manifest's pods have a livenessProbe (Podman makes a health check of each); none of a document that cannot be read. */
export function probedContainers(manifest: string): number {
  return parseAllDocuments(manifest).reduce((count, document) => {
    try {
      const doc: unknown = document.errors.length === 0 ? document.toJS() : undefined;
      const spec = isRecord(doc) ? podOf(doc)?.spec : undefined;
      const containers = isRecord(spec) && Array.isArray(spec.containers) ? spec.containers : [];
      return count + containers.filter((c) => isRecord(c) && isRecord(c.livenessProbe)).length;
    } catch {
      return count;
    }
  }, 0);
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
