// The images a Podman workload runs, and how each is pulled ahead of its create as Podman would pull it:
// `podman run` (image, `--pull` and the run options that concern a pull) and `podman kube play` (each
// container's image and imagePullPolicy, the play options that concern a pull). Pure.
import { type Observable, map, shareReplay } from 'rxjs';
import { parseAllDocuments } from 'yaml';
import type { PodmanCli } from './podman-cli.js';
import { type ImageEngine, type ImageNames, imagesUsedBy } from '../containers/image-gc.js';
import { isRecord } from '../../record.js';
import { type ImagePull, type PullFlags, pullOptions } from '../containers/images.js';
import type { ContainerConfig } from '../containers/run-config.js';
import { type KubeConfig, podOf } from './kube-config.js';

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

/** `podman pull` of `image` into `storage` with `options`, and `podman image exists` to tell whether it is there. */
const podmanPull = (policy: ImagePull['policy'], image: string, storage: readonly string[], options: readonly string[]): ImagePull => ({
  policy,
  image,
  storage,
  args: [...storage, 'pull', '--quiet', ...options, image],
  present: [...storage, 'image', 'exists', image],
});

/** What `podman run` would do about the image of a podman workload, and the pull that does it ahead of time. */
export function podmanImagePull(config: ContainerConfig): ImagePull {
  const { policy, options } = pullOptions(config.commandOptions, PODMAN_FLAGS);
  return podmanPull(policy, config.image, config.generalOptions, options);
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

/** Whether two references name the same image as Podman reads them (a missing tag is `latest`, a missing host Docker Hub's). */
export function sameReference(a: string, b: string): boolean {
  const full = (ref: string) => {
    const first = ref.split('/')[0];
    const hosted =
      ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost')
        ? ref
        : `docker.io/${ref.includes('/') ? '' : 'library/'}${ref}`;
    const last = hosted.slice(hosted.lastIndexOf('/') + 1);
    return last.includes(':') || last.includes('@') ? hosted : `${hosted}:latest`;
  };
  return a !== '' && full(a) === full(b);
}

/** `image inspect`'s id and names, as the format above prints them. */
function imageNames(text: string): ImageNames {
  const [id, tagsJson] = text.trim().split(' ');
  if (!/^[0-9a-f]{12,}$/.test(id ?? '')) throw new Error(`no image id in '${text.slice(0, 100)}'`);
  const tags: unknown = JSON.parse(tagsJson ?? 'null');
  return { id, names: Array.isArray(tags) ? tags.filter((t): t is string => typeof t === 'string') : [] };
}

/**
 * Podman's images for the collector: what its containers use (`ps` rows' image and image id), `rmi` without
 * force (Podman refuses an image a container uses; of an image with other tags only the tag goes), and the
 * storage's graph root.
 */
export function podmanImageEngine(cli: PodmanCli): ImageEngine {
  const folders = new Map<string, Observable<string>>();
  return {
    name: 'podman',
    imagesInUse: (storage) => cli.containers([], storage).pipe(map(imagesUsedBy)),
    describe: (storage, image) => cli.imageInspect(storage, image).pipe(map((text) => (text === undefined ? undefined : imageNames(text)))),
    // By its id: a reference may name another image by the time the removal runs; Podman refuses an image with other names.
    remove: (storage, _image, id) => cli.rmi(storage, id),
    // Podman logs each pull, a run's or another user's too, when it ends.
    pullsSince: (storage, image, sinceMs) =>
      cli.imagePullsSince(storage, new Date(sinceMs)).pipe(map((names) => names.filter((name) => sameReference(name, image)).length)),
    tag: (storage, image, name) => cli.tag(storage, image, name),
    untag: (storage, name) => cli.untag(storage, name),
    storeFolder: (storage) => {
      const key = storage.join('\0');
      let folder = folders.get(key);
      if (!folder) {
        folder = cli.graphRoot(storage).pipe(shareReplay(1));
        folders.set(key, folder);
      }
      return folder;
    },
  };
}
