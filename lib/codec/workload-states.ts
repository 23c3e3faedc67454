// The server's message of workload states read without reflection. A server sends every workload's state to
// every agent, so in a fleet most of what an agent reads is other agents' states: FromServer { updateWorkloadState
// = 2 { workloadStates = 1 : rep WorkloadState { instanceName = 1 { workloadName = 1, agentName = 2, id = 3 },
// executionState = 2 { additionalInfo = 1, oneof: agentDisconnected = 2 … removed = 9 (each an enum) } } } }.
// The fields come out as protobuf-es would give them (spec/lib/workload-states.spec.ts), for the one conversion
// to the domain that every message takes (lib/codec/wire.ts). Pure.
import { WireType } from '@bufbuild/protobuf/wire';
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
const expect = (type: number, wanted: WireType) => {
  if (type !== wanted) throw new NotForHand();
};

/** Strings of ASCII (names and ids are) read natively as Latin-1, which is the same for them; others as protobuf-es decodes them. */
const decoder = new TextDecoder();
function text(bytes: Buffer, from: number, to: number): string {
  for (let i = from; i < to; i++) if (bytes[i] >= 0x80) return decoder.decode(bytes.subarray(from, to));
  return bytes.toString('latin1', from, to);
}

/**
 * Reads one buffer from start to end: a message's fields are read up to its end, never copied out; a field of
 * a known number in another wire type, or bytes that end too soon, stop the hand reader.
 */
class Walk {
  pos = 0;
  readonly bytes: Buffer;
  constructor(bytes: Uint8Array) {
    this.bytes = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  varint(): number {
    let value = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      if (this.pos >= this.bytes.length) throw new NotForHand();
      const b = this.bytes[this.pos++];
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    throw new NotForHand();
  }

  /** An int32 (an enum): the low 32 bits of its varint, signed, as protobuf reads it. */
  int32(): number {
    let low = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.bytes.length) throw new NotForHand();
      const b = this.bytes[this.pos++];
      if (shift < 32) low |= (b & 0x7f) << shift;
      if (b < 0x80) return low | 0;
    }
    throw new NotForHand();
  }

  /** The end of the length-delimited field that starts here. */
  end(): number {
    const length = this.varint();
    const end = this.pos + length;
    if (end > this.bytes.length) throw new NotForHand();
    return end;
  }

  string(): string {
    const end = this.end();
    const value = text(this.bytes, this.pos, end);
    this.pos = end;
    return value;
  }

  /** Passes over a field of wire type `type`. */
  skip(type: number): void {
    if (type === WireType.Varint) this.varint();
    else if (type === WireType.Bit64) this.pos += 8;
    else if (type === WireType.LengthDelimited) this.pos = this.end();
    else if (type === WireType.Bit32) this.pos += 4;
    else throw new NotForHand();
    if (this.pos > this.bytes.length) throw new NotForHand();
  }
}

/**
 * The workload states of a FromServer that is an updateWorkloadState and nothing else; undefined for any other
 * message (or one the hand reader does not take: it is then read the usual way, which says what is wrong).
 */
export function workloadStatesOf(bytes: Uint8Array): WireWorkloadState[] | undefined {
  try {
    const walk = new Walk(bytes);
    if (bytes.length === 0 || walk.varint() !== ((2 << 3) | WireType.LengthDelimited)) return undefined;
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

function tag(walk: Walk): [field: number, type: number] {
  const t = walk.varint();
  const field = Math.floor(t / 8);
  if (field === 0) throw new NotForHand();
  return [field, t & 7];
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
