// The figures of Podman's containers for the metrics: `podman stats` once, with the pod of each container
// from `podman ps` (a podman-kube workload's figures go by its pod).
import { type Observable, forkJoin, map } from 'rxjs';
import type { ContainerStats } from '../../metrics.js';
import type { PodmanCli } from './cli.js';

export function podmanStats(cli: PodmanCli): Observable<ContainerStats[]> {
  const stats$ = cli.run(['stats', '--no-stream', '--format', '{{json .ContainerStats}}'], undefined, 'query').pipe(
    map((out) =>
      out
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as ContainerStats & { ContainerID?: string }),
    ),
  );
  return forkJoin([stats$, cli.listContainers()]).pipe(
    map(([stats, containers]) => {
      const podOf = new Map(containers.map((c) => [c.Id, c.Pod]));
      return stats.map((s): ContainerStats => ({ ...s, Pod: podOf.get(s.ContainerID ?? '') || undefined }));
    }),
  );
}
