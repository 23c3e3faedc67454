// The places of a workload under the agent's folder `<run folder>/<agent>_io/`.
import path from 'node:path';
import type { WorkloadInstanceName } from '../workload.js';

/** `<run folder>/<agent>_io/<workload>.<id>/`: everything the agent keeps on the host for one workload instance. */
export const workloadFolder = (ioFolder: string, n: WorkloadInstanceName): string => path.join(ioFolder, `${n.workloadName}.${n.id}`);

/** swdd~agent-control-interface-pipes-path-naming~1: `<workload folder>/control_interface/` */
export const controlInterfaceFolder = (ioFolder: string, spec: { readonly instanceName: WorkloadInstanceName }): string =>
  path.join(workloadFolder(ioFolder, spec.instanceName), 'control_interface');

/** `<workload folder>/files/`, where the workload's files are written before they are mounted. */
export const filesFolder = (ioFolder: string, spec: { readonly instanceName: WorkloadInstanceName }): string =>
  path.join(workloadFolder(ioFolder, spec.instanceName), 'files');
