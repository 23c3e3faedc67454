// Every enum the agent translates, written once: the domain name, the wire number and, where manifests
// spell it, the manifest text. Each table answers in every direction.
// The wire numbers are written out, not read from the generated enums: those come with protobuf-es's descriptors,
// which the agent builds only when it first needs them (lib/codec/descriptors.cts). spec/lib/tables.spec.ts holds
// each number to the generated code's.
import type * as pb from '../../proto/gen/ank_base_pb.js';
import type * as grpc from '../../proto/gen/grpc_api_pb.js';
import type { ExecutionState } from '../execution-state.js';
import type { AddCondition, DeleteCondition, ReadWrite, RestartPolicy } from '../workload.js';

export class EnumTable<D extends string, W extends number> {
  constructor(private readonly rows: ReadonlyArray<readonly [domain: D, wire: W, text: string]>) {}

  toWire(d: D): W {
    return this.rows.find((r) => r[0] === d)![1];
  }

  /** undefined for a number the table does not know. */
  fromWire(w: number): D | undefined {
    return this.rows.find((r) => r[1] === w)?.[0];
  }

  toText(d: D): string {
    return this.rows.find((r) => r[0] === d)![2];
  }

  /** undefined for a text the table does not know. */
  fromText(t: string): D | undefined {
    return this.rows.find((r) => r[2] === t)?.[0];
  }

  /** The texts, for messages: `NEVER, ON_FAILURE or ALWAYS`. */
  get texts(): string {
    const t = this.rows.map((r) => r[2]);
    return `${t.slice(0, -1).join(', ')} or ${t.at(-1)}`;
  }
}

export const RESTART_POLICY = new EnumTable<RestartPolicy, pb.RestartPolicy>([
  ['Never', 0, 'NEVER'],
  ['OnFailure', 1, 'ON_FAILURE'],
  ['Always', 2, 'ALWAYS'],
]);

export const ADD_CONDITION = new EnumTable<AddCondition, pb.AddCondition>([
  ['Running', 0, 'ADD_COND_RUNNING'],
  ['Succeeded', 1, 'ADD_COND_SUCCEEDED'],
  ['Failed', 2, 'ADD_COND_FAILED'],
]);

export const DELETE_CONDITION = new EnumTable<DeleteCondition, grpc.DeleteCondition>([
  ['Running', 0, 'DEL_COND_RUNNING'],
  ['NotPendingNorRunning', 1, 'DEL_COND_NOT_PENDING_NOR_RUNNING'],
]);

export const READ_WRITE = new EnumTable<ReadWrite, pb.ReadWriteEnum>([
  ['Nothing', 0, 'Nothing'],
  ['Read', 1, 'Read'],
  ['Write', 2, 'Write'],
  ['ReadWrite', 5, 'ReadWrite'],
]);

type StateCase = pb.ExecutionState['ExecutionStateEnum']['case'] & string;

/** Execution states: the domain state and substate, the wire's oneof case, its field number and the substate number. */
export const EXECUTION_STATE: {
  readonly [S in ExecutionState['state']]: { readonly case: StateCase; readonly field: number; readonly substates: Readonly<Record<number, string>> };
} = {
  AgentDisconnected: { case: 'agentDisconnected', field: 2, substates: { 0: 'AgentDisconnected' } },
  Pending: { case: 'pending', field: 3, substates: { 0: 'Initial', 1: 'WaitingToStart', 2: 'Starting', 8: 'StartingFailed' } },
  Running: { case: 'running', field: 4, substates: { 0: 'Ok' } },
  Stopping: { case: 'stopping', field: 5, substates: { 0: 'Stopping', 1: 'WaitingToStop', 2: 'RequestedAtRuntime', 8: 'DeleteFailed' } },
  Succeeded: { case: 'succeeded', field: 6, substates: { 0: 'Ok' } },
  Failed: { case: 'failed', field: 7, substates: { 0: 'ExecFailed', 1: 'Unknown', 2: 'Lost' } },
  NotScheduled: { case: 'notScheduled', field: 8, substates: { 0: 'NotScheduled' } },
  Removed: { case: 'removed', field: 9, substates: { 0: 'Removed' } },
};

/** Each state's substate numbers by name (the table's other way round). */
const SUBSTATE_NUMBERS = new Map(
  Object.entries(EXECUTION_STATE).map(([state, row]) => [state, new Map(Object.entries(row.substates).map(([n, name]) => [name, Number(n)]))]),
);

/** A domain state on the wire: its oneof case and substate number. */
export function wireExecutionState(s: ExecutionState): { readonly case: StateCase; readonly value: number } {
  return { case: EXECUTION_STATE[s.state].case, value: SUBSTATE_NUMBERS.get(s.state)!.get(s.substate)! };
}
