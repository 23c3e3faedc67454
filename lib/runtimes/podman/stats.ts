// The figures of Podman's containers for the metrics: their figures once, with the pod of each container
// from their list, each given to its workload: a podman workload's container by its name, a podman-kube
// workload's containers by their pod.
import { type Observable, forkJoin, map } from 'rxjs';
import type { WorkloadContainerFigures } from '../../metrics.js';
import type { ContainerFigures } from '../../ports.js';
import { parseInstanceKey } from '../../workload.js';
import type { PodmanCli } from './podman-cli.js';

/** A container's figures as `podman stats` gives them, with the pod it is in, if any. */
export interface PodmanFigures extends ContainerFigures {
  readonly Pod?: string;
}

export function podmanFigures(cli: PodmanCli, agentName: string, podOwner: (pod: string) => string | undefined): Observable<WorkloadContainerFigures[]> {
  return forkJoin([cli.figures(), cli.containers()]).pipe(
    map(([stats, containers]) => {
      const podOf = new Map(containers.map((c) => [c.id, c.pod]));
      return ofWorkloads(
        stats.map((s) => ({ ...s, Pod: podOf.get(s.ContainerID ?? '') || undefined })),
        agentName,
        podOwner,
      );
    }),
  );
}

/** The figures of this agent's workloads' containers, each with its workload: by its name, or by the workload that owns its pod. */
export function ofWorkloads(all: readonly PodmanFigures[], agent: string, podOwner: (pod: string) => string | undefined): WorkloadContainerFigures[] {
  // A pod's owner is asked once, however many containers it has.
  const owners = new Map<string, string | undefined>();
  const ownerOf = (pod: string) => (owners.has(pod) ? owners.get(pod) : owners.set(pod, podOwner(pod)).get(pod));
  return all.flatMap(({ Pod, ...c }) => {
    const named = parseInstanceKey(c.Name);
    const workload = named ? (named.agentName === agent ? named.workloadName : undefined) : Pod ? ownerOf(Pod) : undefined;
    return workload === undefined ? [] : [{ ...c, workload }];
  });
}
