// What the agent asks Podman of its containers and volumes: `podman ps` and `podman volume ls`, as JSON.
import { type Observable, map } from 'rxjs';
import type { Container } from '../../ports.js';
import type { Cli } from '../base/cli.js';

export interface Volume {
  readonly Name: string;
  readonly Labels?: Readonly<Record<string, string>> | null;
}

/** A row of `podman ps --format=json`, as far as the agent reads it. */
interface PodmanRow {
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

/** `podman ps --all --format=json`, optionally filtered, of the storage `generalOptions` choose, as the cache's containers. */
export const podmanContainers = (cli: Cli, filters: readonly string[] = [], generalOptions: readonly string[] = []): Observable<Container[]> =>
  cli.run([...generalOptions, 'ps', '--all', '--format=json', ...filters.map((f) => `--filter=${f}`)], { kind: 'query' }).pipe(
    map((text) =>
      parseJsonList<PodmanRow>(text).map((r) => ({
        id: r.Id,
        names: r.Names,
        state: r.State,
        exitCode: r.ExitCode,
        labels: r.Labels,
        pod: r.Pod,
        isInfra: r.IsInfra,
        image: r.Image,
        imageId: r.ImageID,
      })),
    ),
  );

/** `podman volume ls --format=json`, optionally filtered. */
export const podmanVolumes = (cli: Cli, filters: readonly string[] = []): Observable<Volume[]> =>
  cli.run(['volume', 'ls', '--format=json', ...filters.map((f) => `--filter=${f}`)], { kind: 'query' }).pipe(map(parseJsonList<Volume>));

/** A list Podman printed; one that cannot be read is an error of the call, never an empty list. */
function parseJsonList<T>(text: string): T[] {
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
