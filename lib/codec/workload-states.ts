// The server's message of workload states read without reflection. A server sends every workload's state to
// every agent, so in a fleet most of what an agent reads is other agents' states: FromServer { updateWorkloadState
// = 2 { workloadStates = 1 : rep WorkloadState { instanceName = 1 { workloadName = 1, agentName = 2, id = 3 },
// executionState = 2 { additionalInfo = 1, oneof: agentDisconnected = 2 … removed = 9 (each an enum) } } } }.
// The fields come out as protobuf-es would give them (spec/lib/workload-states.spec.ts), for the one conversion
// to the domain that every message takes (lib/codec/wire.ts). Pure.
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import type { ExecutionState } from '../../proto/gen/ank_base_pb.js';

type StateCase = Pick<ExecutionState['ExecutionStateEnum'], 'case' | 'value'>;

/** What the domain reads of a WorkloadState (protobuf-es's messages carry these fields, and more). */
export type WireWorkloadState = {
  readonly instanceName?: { readonly workloadName: string; readonly agentName: string; readonly id: string };
  readonly executionState?: { readonly additionalInfo?: string; readonly ExecutionStateEnum: StateCase };
};

const CASES = ['agentDisconnected', 'pending', 'running', 'stopping', 'succeeded', 'failed', 'notScheduled', 'removed'] as const;

/** A known field in a wire type it does not have: the usual reader decides what that is. */
class NotForHand extends Error {}
const expect = (type: WireType, wanted: WireType) => {
  if (type !== wanted) throw new NotForHand();
};

/**
 * The workload states of a FromServer that is an updateWorkloadState and nothing else; undefined for any other
 * message (or one the hand reader does not take: it is then read the usual way, which says what is wrong).
 */
export function workloadStatesOf(bytes: Uint8Array): WireWorkloadState[] | undefined {
  try {
    const reader = new BinaryReader(bytes);
    if (reader.len === 0) return undefined;
    const [field, type] = reader.tag();
    if (field !== 2 || type !== WireType.LengthDelimited) return undefined;
    const update = reader.bytes();
    // A oneof given twice (the last wins) is for the usual reader.
    if (reader.pos < reader.len) return undefined;
    return statesOf(new BinaryReader(update));
  } catch {
    return undefined;
  }
}

function statesOf(reader: BinaryReader): WireWorkloadState[] {
  const states: WireWorkloadState[] = [];
  while (reader.pos < reader.len) {
    const [field, type] = reader.tag();
    if (field !== 1) reader.skip(type, field);
    else {
      expect(type, WireType.LengthDelimited);
      states.push(stateOf(new BinaryReader(reader.bytes())));
    }
  }
  return states;
}

function stateOf(reader: BinaryReader): WireWorkloadState {
  let instanceName: WireWorkloadState['instanceName'];
  let executionState: WireWorkloadState['executionState'];
  while (reader.pos < reader.len) {
    const [field, type] = reader.tag();
    if (field !== 1 && field !== 2) {
      reader.skip(type, field);
      continue;
    }
    expect(type, WireType.LengthDelimited);
    // A message field given twice merges, as protobuf-es merges it.
    if (field === 1) instanceName = nameOf(new BinaryReader(reader.bytes()), instanceName);
    else executionState = executionOf(new BinaryReader(reader.bytes()), executionState);
  }
  return { instanceName, executionState };
}

function nameOf(reader: BinaryReader, before: WireWorkloadState['instanceName']): WireWorkloadState['instanceName'] {
  let { workloadName, agentName, id } = before ?? { workloadName: '', agentName: '', id: '' };
  while (reader.pos < reader.len) {
    const [field, type] = reader.tag();
    if (field < 1 || field > 3) {
      reader.skip(type, field);
      continue;
    }
    expect(type, WireType.LengthDelimited);
    if (field === 1) workloadName = reader.string();
    else if (field === 2) agentName = reader.string();
    else id = reader.string();
  }
  return { workloadName, agentName, id };
}

function executionOf(reader: BinaryReader, before: WireWorkloadState['executionState']): WireWorkloadState['executionState'] {
  let additionalInfo = before?.additionalInfo;
  let state: StateCase = before?.ExecutionStateEnum ?? { case: undefined, value: undefined };
  while (reader.pos < reader.len) {
    const [field, type] = reader.tag();
    if (field < 1 || field > 9) {
      reader.skip(type, field);
    } else if (field === 1) {
      expect(type, WireType.LengthDelimited);
      additionalInfo = reader.string();
    } else {
      expect(type, WireType.Varint);
      state = { case: CASES[field - 2], value: reader.int32() } as typeof state;
    }
  }
  return { additionalInfo, ExecutionStateEnum: state };
}
