// The libpod REST API on a Podman service's socket, for what the agent asks of Podman most: its containers
// (the rows `podman ps --format=json` prints alike), their figures, a container removed, stopped or started,
// and whether an image is there. Each answer typed; a failure of the way (no connection, no answer in time,
// an answer other than the API's) is a RouteLost: the caller asks the CLI instead, which says what is wrong.
import { AnswerCut, RouteLost, UnixHttp, oneShot } from '../../drivers/unix-http.js';
import type { Container, ContainerFigures } from '../../ports.js';

// A failure of the way is not the engine's answer: the call is made again by the CLI (and a cut answer ends the
// service's turn whatever its ping says: Podman's remote client spins for ever on one).
export { AnswerCut, RouteLost };

/** The API's version in each path: Podman 4.0's, which every later Podman answers. */
const API = '/v4.0.0/libpod';
/** The most an answer may hold (as the CLI's output). */
const MAX_ANSWER_BYTES = 64 * 2 ** 20;
/**
 * How long a connection stays open without a request: a burst of calls shares a few connections (a connection
 * each cost the agent more CPU than its request), and each goes well before the service's own idle close.
 */
const IDLE_CONNECTION_MS = 1000;

/** A container as `GET /containers/json` and `podman ps --format=json` give it, as far as the agent reads it. */
export interface PodmanRow {
  readonly Id: string;
  readonly Names?: readonly string[];
  readonly State?: string;
  readonly ExitCode?: number;
  readonly Labels?: Readonly<Record<string, string>> | null;
  readonly Pod?: string;
  readonly IsInfra?: boolean;
  readonly Image?: string;
  readonly ImageID?: string;
}

/** A container's figures, with its id (to find its pod). */
export type FiguresRow = ContainerFigures & { readonly ContainerID?: string };

export class Libpod {
  private readonly connections: UnixHttp;

  constructor(readonly socket: string) {
    this.connections = new UnixHttp(socket, { maxConnections: 8, idleMs: IDLE_CONNECTION_MS, maxAnswerBytes: MAX_ANSWER_BYTES });
  }

  /** Closes the connections kept open. */
  dispose(): void {
    this.connections.dispose();
  }

  /** Every container, or those `filters` (key=value, as `--filter` takes them) choose. */
  async containers(filters: readonly string[], deadlineMs: number): Promise<PodmanRow[]> {
    const grouped: Record<string, string[]> = {};
    for (const filter of filters) {
      const [key, ...value] = filter.split('=');
      grouped[key] = [...(grouped[key] ?? []), value.join('=')];
    }
    const query = `all=true&filters=${encodeURIComponent(JSON.stringify(grouped))}`;
    return listOf<PodmanRow>(await this.ok('GET', `/containers/json?${query}`, deadlineMs));
  }

  /** The figures of every running container. */
  async figures(deadlineMs: number): Promise<FiguresRow[]> {
    const answer = jsonOf(await this.ok('GET', '/containers/stats?stream=false', deadlineMs)) as { Stats?: FiguresRow[] | null } | null;
    return answer?.Stats ?? [];
  }

  /**
   * A container removed (stopped first as `podman stop` does, with its own stop timeout), stopped or started;
   * false when there is no such container.
   */
  async act(action: 'remove' | 'stop' | 'start', id: string, deadlineMs: number): Promise<boolean> {
    const container = `/containers/${encodeURIComponent(id)}`;
    const [method, url] = action === 'remove' ? ['DELETE', `${container}?force=true`] : ['POST', `${container}/${action}`];
    const { status, body } = await this.connections.request(method, API + url, deadlineMs);
    if (status === 404) return false;
    // 304: already stopped or already running.
    if (status !== 304) okOrLost(status, body);
    return true;
  }

  /** Whether the image `image` is in the service's storage. */
  async imageExists(image: string, deadlineMs: number): Promise<boolean> {
    const { status, body } = await this.connections.request('GET', `${API}/images/${encodeURIComponent(image)}/exists`, deadlineMs);
    if (status === 404) return false;
    okOrLost(status, body);
    return true;
  }

  private async ok(method: string, url: string, deadlineMs: number): Promise<string> {
    const { status, body } = await this.connections.request(method, API + url, deadlineMs);
    return okOrLost(status, body);
  }
}

/** Whether `socket` answers Podman's ping as Podman does (its API version in the answer), within `withinMs`. */
export async function ping(socket: string, withinMs: number): Promise<boolean> {
  try {
    const { status, headers } = await oneShot(socket, 'GET', '/_ping', withinMs);
    return status === 200 && headers.has('libpod-api-version');
  } catch {
    return false;
  }
}

/** The JSON of an answer; an answer that is not JSON is no answer. */
function jsonOf(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    throw new RouteLost(`the service's answer is not JSON: ${body.slice(0, 80)}`);
  }
}

/** A list in an answer; one that is not a list is no answer. */
function listOf<T>(body: string): T[] {
  const parsed = jsonOf(body);
  if (parsed !== null && !Array.isArray(parsed)) throw new RouteLost(`the service's list is not a list: ${body.slice(0, 80)}`);
  return (parsed as T[] | null) ?? [];
}

/** An answer other than success is no answer. */
function okOrLost(status: number, body: string): string {
  if (status >= 200 && status < 300) return body;
  throw new RouteLost(`the service answered ${status}: ${body.slice(0, 200)}`);
}

/** A row of Podman's list as the container cache holds it. */
export const asContainer = (r: PodmanRow): Container => ({
  id: r.Id,
  names: r.Names,
  state: r.State,
  exitCode: r.ExitCode,
  labels: r.Labels,
  pod: r.Pod,
  isInfra: r.IsInfra,
  image: r.Image,
  imageId: r.ImageID,
});

/** A list Podman printed; one that cannot be read is an error of the call, never an empty list. */
export function parseJsonList<T>(text: string): T[] {
  if (text.trim() === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`Podman's list is not JSON: ${JSON.stringify(text.slice(0, 80))}`);
  }
  if (parsed !== null && !Array.isArray(parsed)) throw new Error(`Podman's list is not a list: ${JSON.stringify(text.slice(0, 80))}`);
  return (parsed as T[] | null) ?? [];
}
