// The server's message of workload states read without reflection. A server sends every workload's state to
// every agent, so in a fleet most of what an agent reads is other agents' states: FromServer { updateWorkloadState
// = 2 { workloadStates = 1 : rep WorkloadState { instanceName = 1 { workloadName = 1, agentName = 2, id = 3 },
// executionState = 2 { additionalInfo = 1, oneof: agentDisconnected = 2 … removed = 9 (each an enum) } } } }.
// The fields come out as protobuf-es would give them (spec/lib/workload-states.spec.ts), for the one conversion
// to the domain that every message takes (lib/codec/wire.ts). Pure.
import { NotForHand, Walk, WireType, expect, tag } from './proto-reader.js';
import type { ExecutionState } from '../../proto/gen/ank_base_pb.js';

type StateCase = Pick<ExecutionState['ExecutionStateEnum'], 'case' | 'value'>;

/** What the domain reads of a WorkloadState (protobuf-es's messages carry these fields, and more). */
export type WireWorkloadState = {
  readonly instanceName?: { readonly workloadName: string; readonly agentName: string; readonly id: string };
  readonly executionState?: { readonly additionalInfo?: string; readonly ExecutionStateEnum: StateCase };
};

const CASES = ['agentDisconnected', 'pending', 'running', 'stopping', 'succeeded', 'failed', 'notScheduled', 'removed'] as const;

/**
 * The workload states of a FromServer that is an updateWorkloadState and nothing else; undefined for any other
 * message (or one the hand reader does not take: it is then read the usual way, which says what is wrong).
 */
export function workloadStatesOf(bytes: Uint8Array): WireWorkloadState[] | undefined {
  try {
    const walk = new Walk(bytes);
    if (bytes.length === 0 || walk.uint32() !== ((2 << 3) | WireType.LengthDelimited)) return undefined;
    const end = walk.end();
    // A oneof given twice (the last wins) is for the usual reader.
    if (end !== bytes.length) return undefined;
    const states: WireWorkloadState[] = [];
    while (walk.pos < end) {
      const [field, type] = tag(walk);
      if (field !== 1) walk.skip(type);
      else {
        expect(type, WireType.LengthDelimited);
        states.push(stateOf(walk, walk.end()));
      }
    }
    return states;
  } catch (err) {
    if (err instanceof NotForHand) return undefined;
    throw err;
  }
}

function stateOf(walk: Walk, end: number): WireWorkloadState {
  let instanceName: WireWorkloadState['instanceName'];
  let executionState: WireWorkloadState['executionState'];
  while (walk.pos < end) {
    const [field, type] = tag(walk);
    if (field !== 1 && field !== 2) {
      walk.skip(type);
      continue;
    }
    expect(type, WireType.LengthDelimited);
    // A message field given twice merges, as protobuf-es merges it.
    if (field === 1) instanceName = nameOf(walk, walk.end(), instanceName);
    else executionState = executionOf(walk, walk.end(), executionState);
  }
  if (walk.pos !== end) throw new NotForHand();
  return { instanceName, executionState };
}

function nameOf(walk: Walk, end: number, before: WireWorkloadState['instanceName']): WireWorkloadState['instanceName'] {
  let { workloadName, agentName, id } = before ?? { workloadName: '', agentName: '', id: '' };
  while (walk.pos < end) {
    const [field, type] = tag(walk);
    if (field < 1 || field > 3) {
      walk.skip(type);
      continue;
    }
    expect(type, WireType.LengthDelimited);
    if (field === 1) workloadName = walk.string();
    else if (field === 2) agentName = walk.string();
    else id = walk.string();
  }
  if (walk.pos !== end) throw new NotForHand();
  return { workloadName, agentName, id };
}

function executionOf(walk: Walk, end: number, before: WireWorkloadState['executionState']): WireWorkloadState['executionState'] {
  let additionalInfo = before?.additionalInfo;
  let state: StateCase = before?.ExecutionStateEnum ?? { case: undefined, value: undefined };
  while (walk.pos < end) {
    const [field, type] = tag(walk);
    if (field > 9) {
      walk.skip(type);
    } else if (field === 1) {
      expect(type, WireType.LengthDelimited);
      additionalInfo = walk.string();
    } else {
      expect(type, WireType.Varint);
      state = { case: CASES[field - 2], value: walk.int32() } as StateCase;
    }
  }
  if (walk.pos !== end) throw new NotForHand();
  return { additionalInfo, ExecutionStateEnum: state };
}
