// What the core receives from and sends to the server, independent of the wire format.
import type { ExecutionState } from './execution-state.js';
import type { DeletedWorkload, WorkloadInstanceName, WorkloadSpec } from './workload.js';

export interface WorkloadState {
  readonly instanceName: WorkloadInstanceName;
  readonly executionState: ExecutionState;
}

/** Opaque to the core: requests and responses travel as the wire objects they are. */
export type WireRequest = { readonly requestId: string } & object;
export type WireResponse = { readonly requestId: string } & object;

export type FromServer =
  | { readonly kind: 'serverHello'; readonly added: readonly WorkloadSpec[] }
  | { readonly kind: 'updateWorkload'; readonly added: readonly WorkloadSpec[]; readonly deleted: readonly DeletedWorkload[] }
  | { readonly kind: 'updateWorkloadState'; readonly states: readonly WorkloadState[] }
  | { readonly kind: 'response'; readonly response: WireResponse };

export type ToServer =
  | { readonly kind: 'updateWorkloadState'; readonly states: readonly WorkloadState[] }
  | { readonly kind: 'request'; readonly request: WireRequest }
  | { readonly kind: 'agentLoadStatus'; readonly agentName: string; readonly cpuUsage: number; readonly freeMemory: number }
  | { readonly kind: 'goodbye' };
