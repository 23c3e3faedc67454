// What the core receives from and sends to the server: its own types, except the Control Interface requests and
// responses, which pass through as the protobuf messages they are (so that fields the agent does not know go on).
import type { Request, Response } from '../proto/gen/ank_base_pb.js';
import type { ProtocolLine } from './version.js';
import type { ExecutionState } from './execution-state.js';
import type { DeletedWorkload, WorkloadInstanceName, WorkloadSpec } from './workload.js';

export interface WorkloadState {
  readonly instanceName: WorkloadInstanceName;
  readonly executionState: ExecutionState;
}

/** Requests and responses travel through the core as the wire objects they are. */
export type WireRequest = Request;
export type WireResponse = Response;

export interface LogsOptions {
  readonly follow: boolean;
  /** Lines from the end; undefined (or -1 on the wire) means all. */
  readonly tail?: number;
  readonly since?: string;
  readonly until?: string;
}

export interface LogEntry {
  readonly instanceName: WorkloadInstanceName;
  readonly message: string;
  /** The message's length in UTF-8, measured once where the line is taken (batching, metrics and the codec read it). */
  readonly bytes: number;
}

export const logEntry = (instanceName: WorkloadInstanceName, message: string, bytes = Buffer.byteLength(message)): LogEntry => ({
  instanceName,
  message,
  bytes,
});

export type FromServer =
  /** Not a message of the server's: the link's word that a connection is up, and which protocol lines workloads may speak through it. */
  | { readonly kind: 'connected'; readonly lines: readonly ProtocolLine[] }
  /** The link's word that the connection is gone (what was sent on it is forgotten by the server). */
  | { readonly kind: 'disconnected' }
  | { readonly kind: 'serverHello'; readonly added: readonly WorkloadSpec[] }
  | { readonly kind: 'updateWorkload'; readonly added: readonly WorkloadSpec[]; readonly deleted: readonly DeletedWorkload[] }
  | { readonly kind: 'updateWorkloadState'; readonly states: readonly WorkloadState[] }
  | { readonly kind: 'response'; readonly response: WireResponse }
  | { readonly kind: 'logsRequest'; readonly requestId: string; readonly workloads: readonly WorkloadInstanceName[]; readonly options: LogsOptions }
  | { readonly kind: 'logsCancelRequest'; readonly requestId: string };

export type ToServer =
  | { readonly kind: 'updateWorkloadState'; readonly states: readonly WorkloadState[] }
  | { readonly kind: 'request'; readonly request: WireRequest }
  | { readonly kind: 'agentLoadStatus'; readonly agentName: string; readonly cpuUsage: number; readonly freeMemory: number }
  | { readonly kind: 'logEntries'; readonly requestId: string; readonly entries: readonly LogEntry[] }
  | { readonly kind: 'logsStop'; readonly requestId: string; readonly instanceName: WorkloadInstanceName };
