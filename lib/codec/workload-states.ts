// The server's message of workload states read without reflection. A server sends every workload's state to
// every agent, so in a fleet most of what an agent reads is other agents' states: FromServer { updateWorkloadState
// = 2 { workloadStates = 1 : rep WorkloadState { instanceName = 1 { workloadName = 1, agentName = 2, id = 3 },
// executionState = 2 { additionalInfo = 1, oneof: agentDisconnected = 2 … removed = 9 (each an enum) } } } }.
// The fields come out as protobuf-es would give them (spec/lib/workload-states.spec.ts), for the one conversion
// to the domain that every message takes (lib/codec/wire.ts). Pure.
import { type Walk, byHand, enumOf, fields, soleField, stringOf, within } from './proto-reader.js';
import type { ExecutionState } from '../../proto/gen/ank_base_pb.js';
import { EXECUTION_STATE } from './tables.js';

type StateCase = Pick<ExecutionState['ExecutionStateEnum'], 'case' | 'value'>;

/** What the domain reads of a WorkloadState (protobuf-es's messages carry these fields, and more). */
export type WireWorkloadState = {
  readonly instanceName?: { readonly workloadName: string; readonly agentName: string; readonly id: string };
  readonly executionState?: { readonly additionalInfo?: string; readonly ExecutionStateEnum: StateCase };
};

/** The members of ExecutionState's oneof by field number. */
const CASE_OF_FIELD = new Map(Object.values(EXECUTION_STATE).map((row) => [row.field, row.case]));

/**
 * The workload states of a FromServer that is an updateWorkloadState and nothing else; undefined for any other
 * message (or one the hand reader does not take: it is then read the usual way, which says what is wrong).
 */
export function workloadStatesOf(bytes: Uint8Array): WireWorkloadState[] | undefined {
  return byHand(() => {
    const top = soleField(bytes);
    if (top?.field !== 2) return undefined;
    const { walk, end } = top;
    const states: WireWorkloadState[] = [];
    fields(walk, end, (field, type) => {
      if (field === 1) states.push(stateOf(walk, within(walk, type)));
      else return false;
    });
    return states;
  });
}

function stateOf(walk: Walk, end: number): WireWorkloadState {
  let instanceName: WireWorkloadState['instanceName'];
  let executionState: WireWorkloadState['executionState'];
  fields(walk, end, (field, type) => {
    // A message field given twice merges, as protobuf-es merges it.
    if (field === 1) instanceName = nameOf(walk, within(walk, type), instanceName);
    else if (field === 2) executionState = executionOf(walk, within(walk, type), executionState);
    else return false;
  });
  return { instanceName, executionState };
}

/** A WorkloadInstanceName, merged into `before` (one given twice), as protobuf-es merges it. */
export function nameOf(walk: Walk, end: number, before?: WireWorkloadState['instanceName']): NonNullable<WireWorkloadState['instanceName']> {
  let { workloadName, agentName, id } = before ?? { workloadName: '', agentName: '', id: '' };
  fields(walk, end, (field, type) => {
    if (field === 1) workloadName = stringOf(walk, type);
    else if (field === 2) agentName = stringOf(walk, type);
    else if (field === 3) id = stringOf(walk, type);
    else return false;
  });
  return { workloadName, agentName, id };
}

function executionOf(walk: Walk, end: number, before: WireWorkloadState['executionState']): WireWorkloadState['executionState'] {
  let additionalInfo = before?.additionalInfo;
  let state: StateCase = before?.ExecutionStateEnum ?? { case: undefined, value: undefined };
  fields(walk, end, (field, type) => {
    const member = CASE_OF_FIELD.get(field);
    if (field === 1) additionalInfo = stringOf(walk, type);
    else if (member !== undefined) state = { case: member, value: enumOf(walk, type) } as StateCase;
    else return false;
  });
  return { additionalInfo, ExecutionStateEnum: state };
}
