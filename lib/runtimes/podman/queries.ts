// What the agent asks Podman of its containers and volumes: `podman ps` and `podman volume ls`, as JSON.
import { type Observable, map } from 'rxjs';
import type { Container } from '../../ports.js';
import type { Cli } from '../base/cli.js';

export interface Volume {
  readonly Name: string;
  readonly Labels?: Readonly<Record<string, string>> | null;
}

/** `podman ps --all --format=json`, optionally filtered. */
export const podmanContainers = (cli: Cli, filters: readonly string[] = []): Observable<Container[]> =>
  cli.run(['ps', '--all', '--format=json', ...filters.map((f) => `--filter=${f}`)], undefined, 'query').pipe(map(parseJsonList<Container>));

/** `podman volume ls --format=json`, optionally filtered. */
export const podmanVolumes = (cli: Cli, filters: readonly string[] = []): Observable<Volume[]> =>
  cli.run(['volume', 'ls', '--format=json', ...filters.map((f) => `--filter=${f}`)], undefined, 'query').pipe(map(parseJsonList<Volume>));

function parseJsonList<T>(text: string): T[] {
  if (text.trim() === '') return [];
  const parsed = JSON.parse(text) as T[] | null;
  return parsed ?? [];
}
