// What the agent reads of nerdctl (the containerd runtime's CLI): its container list, its events, its pulls, and the
// state table of the released containerd connector. Pure: the driver is lib/runtimes/containerd/runtime.ts.
import { ExecutionState, exitedWith } from '../../execution-state.js';
import type { Container, ContainerChange, ContainerEvent, ContainerFigures, StateReading } from '../../ports.js';
import { type ImagePull, type PullFlags, pullOptions } from '../containers/images.js';
import type { ContainerConfig } from '../containers/run-config.js';

/** `k=v,k=v` as nerdctl 2.0 writes a container's labels in `ps --format json` (a value may hold `=`). */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const at = pair.indexOf('=');
    if (at > 0) labels[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return labels;
}

/**
 * The state word and exit code in nerdctl's `Status` column: `Up`, `Exited (3) 2 seconds ago`,
 * `Restarting (1) …`, `Created`, `Paused`, `Unknown`, … (nerdctl's formatter.ContainerStatus).
 */
export function parseStatus(status: string): { readonly state: string; readonly exitCode?: number } {
  if (status === 'Up' || status.startsWith('Up ')) return { state: 'running' };
  const withCode = /^(Exited|Restarting) \((-?\d+)\)/.exec(status);
  if (withCode) return { state: withCode[1].toLowerCase(), exitCode: Number(withCode[2]) };
  return { state: (status.split(' ')[0] ?? '').toLowerCase() };
}

/** The rows of `nerdctl ps --all --no-trunc --format json` (one JSON object a line) as containers; rows that are no container are passed over. */
export function parseContainers(output: string): Container[] {
  const containers: Container[] = [];
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    let row: { ID?: unknown; Names?: unknown; Status?: unknown; Labels?: unknown; Image?: unknown };
    try {
      row = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof row.ID !== 'string' || row.ID === '') continue;
    containers.push({
      id: row.ID,
      names: typeof row.Names === 'string' ? [row.Names] : [],
      ...parseStatus(typeof row.Status === 'string' ? row.Status : ''),
      labels: parseLabels(typeof row.Labels === 'string' ? row.Labels : ''),
      ...(typeof row.Image === 'string' && row.Image !== '' && { image: row.Image }),
    });
  }
  return containers;
}

/** containerd's event topics, in the container cache's words of a change. */
const TOPICS: Readonly<Record<string, ContainerChange>> = {
  '/tasks/exit': 'exited',
  '/tasks/start': 'started',
  '/tasks/paused': 'paused',
  '/tasks/resumed': 'resumed',
  '/containers/delete': 'removed',
  '/containers/create': 'created',
};

/**
 * A line of `nerdctl events --format '{{json .}}'` as a container event, when it is one the cache uses: a task's
 * exit (with its exit status), start, pause and resume, and a container's creation and deletion. Others (snapshots, images, the
 * exec processes of a container, whose exit is not the container's) are undefined.
 */
export function parseEvent(line: string): NamespacedEvent | undefined {
  let event: { Timestamp?: unknown; Topic?: unknown; Event?: unknown; Namespace?: unknown };
  try {
    event = JSON.parse(line);
  } catch {
    return undefined;
  }
  const change = typeof event.Topic === 'string' ? TOPICS[event.Topic] : undefined;
  if (!change || typeof event.Event !== 'string') return undefined;
  let body: { id?: unknown; container_id?: unknown; exit_status?: unknown };
  try {
    body = JSON.parse(event.Event);
  } catch {
    return undefined;
  }
  const id = typeof body.container_id === 'string' ? body.container_id : body.id;
  if (typeof id !== 'string' || id === '') return undefined;
  // An exec's exit names its own id beside the container's: only the container's task counts.
  if (change === 'exited' && body.id !== undefined && body.id !== id) return undefined;
  const at = typeof event.Timestamp === 'string' ? Date.parse(event.Timestamp) : Number.NaN;
  return {
    id,
    change,
    ...(change === 'exited' && typeof body.exit_status === 'number' ? { exitCode: body.exit_status } : {}),
    ...(Number.isFinite(at) ? { at } : {}),
    namespace: typeof event.Namespace === 'string' ? event.Namespace : '',
  };
}

/** A container event and the containerd namespace it happened in (one `nerdctl events` hears every namespace of its containerd). */
export type NamespacedEvent = ContainerEvent & { readonly namespace: string };

/**
 * The containerd namespace nerdctl's general options `scope` select (the last `--namespace`/`-n` given, else
 * CONTAINERD_NAMESPACE, else `default`), and the options that select the containerd itself (the rest).
 */
export function splitScope(scope: readonly string[], env = process.env): { readonly namespace: string; readonly containerd: string[] } {
  let namespace = env.CONTAINERD_NAMESPACE || 'default';
  const containerd: string[] = [];
  for (let i = 0; i < scope.length; i++) {
    const at = scope[i].indexOf('=');
    const flag = at > 0 ? scope[i].slice(0, at) : scope[i];
    if (flag !== '--namespace' && flag !== '-n') containerd.push(scope[i]);
    else namespace = at > 0 ? scope[i].slice(at + 1) : (scope[++i] ?? namespace);
  }
  return { namespace, containerd };
}

/** swdd~containerd-state-getter-maps-state~1: the released connector's table (exit code from the container). */
export function containerdState(c: Container): ExecutionState {
  switch ((c.state ?? '').toLowerCase()) {
    case 'created':
    case 'restarting':
      return ExecutionState.starting(c.state!.toLowerCase());
    case 'running':
      return ExecutionState.running();
    case 'exited':
      return exitedWith(c.exitCode ?? 0);
    case 'dead':
      return { ...ExecutionState.failed(`Exit code: '${c.exitCode ?? 0}'`), exitCode: c.exitCode ?? 0 };
    case 'removing':
      return ExecutionState.stopping('removing');
    default:
      // swdd~containerd-state-getter-returns-unknown-state~1 (`paused` among them)
      return ExecutionState.unknown(c.state ?? '');
  }
}

/**
 * swdd~containerd-state-getter-returns-lost-state~1: the reading of container `id` (a full id, or one cut
 * short as nerdctl shows it) in a snapshot: Lost when it is gone.
 */
export const containerdReading =
  (id: string) =>
  (containers: ReadonlyMap<string, Container>): StateReading => {
    const c = containers.get(id) ?? [...containers.values()].find((x) => x.id.startsWith(id) || id.startsWith(x.id));
    return { state: c ? containerdState(c) : ExecutionState.lost(), transient: false };
  };

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  m: 1e6,
  g: 1e9,
  t: 1e12,
  p: 1e15,
  e: 1e18,
  ki: 2 ** 10,
  mi: 2 ** 20,
  gi: 2 ** 30,
  ti: 2 ** 40,
  pi: 2 ** 50,
  ei: 2 ** 60,
};

/** `588KiB`, `1.1kB`, `0B`, `8EiB` (binary and decimal units, as nerdctl writes sizes) in bytes; 0 when it is none. */
export function parseSize(text: string): number {
  const m = /^\s*([\d.]+)\s*([kmgtpe]i?)?b\s*$/i.exec(text);
  return m ? Number(m[1]) * (SIZE_UNITS[(m[2] ?? '').toLowerCase()] ?? 0) : 0;
}

/** The rows of `nerdctl stats --no-stream --no-trunc --format '{{json .}}'` as figures; lines that are none are passed over. */
export function parseStats(output: string): ContainerFigures[] {
  const pair = (text: unknown) => (typeof text === 'string' ? text.split('/').map(parseSize) : [0, 0]);
  return output.split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return [];
    try {
      const row = JSON.parse(line) as Record<string, unknown>;
      if (typeof row.Name !== 'string') return [];
      const [memory, limit] = pair(row.MemUsage);
      const [netIn, netOut] = pair(row.NetIO);
      const [blockIn, blockOut] = pair(row.BlockIO);
      return [
        {
          Name: row.Name,
          CPU: Number.parseFloat(String(row.CPUPerc ?? '0')) || 0,
          MemUsage: memory,
          MemLimit: limit,
          NetInput: netIn,
          NetOutput: netOut,
          BlockInput: blockIn,
          BlockOutput: blockOut,
          PIDs: Number(row.PIDs) || 0,
        },
      ];
    } catch {
      return [];
    }
  });
}

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

/** What `nerdctl run` of a containerd workload in `scope` (the general options its calls carry) would do about its image, and the pull that does it ahead of time. */
export function nerdctlImagePull(config: ContainerConfig, scope: readonly string[]): ImagePull {
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
