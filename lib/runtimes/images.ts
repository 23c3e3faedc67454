// The images a workload runs and how each is pulled ahead of its create, as its runtime's CLI would pull it:
// Podman's and nerdctl's `run` (image, `--pull` and the run options that concern a pull) and Podman's
// `kube play` (each container's image and imagePullPolicy, the play options that concern a pull). Pure.
import { parseAllDocuments } from 'yaml';
import { isRecord } from '../record.js';
import { type KubeConfig, type PodmanConfig, podOf } from './podman/runtime-config.js';

/** How an image is to be had before its workload is created: not at all, when it is not there, or always. */
export interface ImagePull {
  readonly policy: 'never' | 'missing' | 'always';
  readonly image: string;
  /** The CLI's general options: which storage (or containerd namespace) the image goes to. */
  readonly storage: readonly string[];
  /** The pull: the CLI's arguments, with the options that reach or choose the image. */
  readonly args: readonly string[];
  /** A query that fails with exit code 1 when the image is not there. */
  readonly present: readonly string[];
}

/** Options that say how to reach or choose an image, with whether they take a value. */
type PullFlags = Readonly<Record<string, 'value' | 'switch'>>;

/** Podman's (`run` and `kube play` take those of `pull`). */
const PODMAN_FLAGS: PullFlags = {
  '--tls-verify': 'switch',
  '--authfile': 'value',
  '--creds': 'value',
  '--cert-dir': 'value',
  '--platform': 'value',
  '--arch': 'value',
  '--os': 'value',
  '--variant': 'value',
  '--decryption-key': 'value',
};

/** nerdctl's `run` options that its `pull` takes too (a registry's TLS is a general option there: `--insecure-registry`). */
const NERDCTL_FLAGS: PullFlags = {
  '--platform': 'value',
  '--verify': 'value',
  '--cosign-key': 'value',
  '--cosign-certificate-identity': 'value',
  '--cosign-certificate-identity-regexp': 'value',
  '--cosign-certificate-oidc-issuer': 'value',
  '--cosign-certificate-oidc-issuer-regexp': 'value',
  '--ipfs-address': 'value',
};

/** The pull options among `given` (as `--flag=value`) and the policy its `--pull` asks for (`missing` unless told; `newer` pulls as `always`). */
function pullOptions(given: readonly string[], flags: PullFlags): { policy: ImagePull['policy']; options: string[] } {
  let policy: ImagePull['policy'] = 'missing';
  const options: string[] = [];
  for (let i = 0; i < given.length; i++) {
    const at = given[i].indexOf('=');
    const [flag, value] = at > 0 ? [given[i].slice(0, at), given[i].slice(at + 1)] : [given[i], undefined];
    if (flag === '--pull') {
      const asked = value ?? given[++i] ?? '';
      policy = asked === 'never' ? 'never' : asked === 'always' || asked === 'newer' ? 'always' : 'missing';
    } else if (flags[flag] === 'switch') {
      options.push(given[i]);
    } else if (flags[flag] === 'value') {
      options.push(value === undefined ? `${flag}=${given[++i] ?? ''}` : given[i]);
    }
  }
  return { policy, options };
}

/** `podman pull` of `image` into `storage` with `options`, and `podman image exists` to tell whether it is there. */
const podmanPull = (policy: ImagePull['policy'], image: string, storage: readonly string[], options: readonly string[]): ImagePull => ({
  policy,
  image,
  storage,
  args: [...storage, 'pull', '--quiet', ...options, image],
  present: [...storage, 'image', 'exists', image],
});

/** What `podman run` would do about the image of a podman workload, and the pull that does it ahead of time. */
export function podmanImagePull(config: PodmanConfig): ImagePull {
  const { policy, options } = pullOptions(config.commandOptions, PODMAN_FLAGS);
  return podmanPull(policy, config.image, config.generalOptions, options);
}

/** The same for `nerdctl run` of a containerd workload in `scope` (the general options its calls carry). */
export function nerdctlImagePull(config: PodmanConfig, scope: readonly string[]): ImagePull {
  const { policy, options } = pullOptions(config.commandOptions, NERDCTL_FLAGS);
  const { image } = config;
  return {
    policy,
    image,
    storage: scope,
    args: [...scope, 'pull', '--quiet', ...options, image],
    present: [...scope, 'image', 'inspect', '--format', '{{.ID}}', image],
  };
}

/**
 * The images `podman kube play` pulls for a manifest: each container's (init containers too) of its Pods and
 * Deployments, by its imagePullPolicy (Podman's default is IfNotPresent), with the play options that concern
 * a pull. None with `--build`: Podman builds those images itself, from the Containerfiles beside it.
 */
export function kubeImagePulls(config: KubeConfig): ImagePull[] {
  if (config.playOptions.some((o) => o === '--build' || o.startsWith('--build='))) return [];
  const { options } = pullOptions(config.playOptions, PODMAN_FLAGS);
  const pulls = new Map<string, ImagePull>();
  for (const document of parseAllDocuments(config.manifest)) {
    // A manifest that cannot be read (or expands past YAML's alias bound) is for the play to refuse, not for a pull to guess at.
    let doc: unknown;
    try {
      if (document.errors.length > 0) return [];
      doc = document.toJS();
    } catch {
      return [];
    }
    const spec = isRecord(doc) ? podOf(doc)?.spec : undefined;
    if (!isRecord(spec)) continue;
    for (const container of [spec.initContainers, spec.containers].flatMap((list) => (Array.isArray(list) ? list : []))) {
      if (!isRecord(container) || typeof container.image !== 'string' || container.image === '') continue;
      const image = container.image;
      // Podman reads the policy in any case (`always` as `Always`).
      const asked = typeof container.imagePullPolicy === 'string' ? container.imagePullPolicy.toLowerCase() : '';
      const policy = asked === 'always' ? 'always' : asked === 'never' ? 'never' : 'missing';
      pulls.set(`${policy}\0${image}`, podmanPull(policy, image, config.generalOptions, options));
    }
  }
  return [...pulls.values()];
}

/** Whether `pull` fetches nothing that `current` (what an update replaces) did not already have: the same image from the same storage. */
export const alreadyThere = (pull: ImagePull, current: readonly ImagePull[]): boolean =>
  pull.policy === 'missing' && current.some((c) => c.image === pull.image && c.storage.join('\0') === pull.storage.join('\0'));
