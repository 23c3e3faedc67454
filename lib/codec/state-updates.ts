// The message each create, update and delete sends at least twice, its workloads' states, written without
// reflection (built by reflection it cost more than the rest of a state's way to the server):
//   grpc_api.ToServer { updateWorkloadState = 2 { repeated workloadStates = 1 ank_base.WorkloadState {
//     instanceName = 1 { workloadName = 1; agentName = 2; id = 3 }
//     executionState = 2 { optional additionalInfo = 1; oneof { agentDisconnected = 2 … removed = 9 } } } } }
// An empty name is left out; the additional info has presence and is always written, as is the state's member
// of the oneof, even 0.
import type { ExecutionState } from '../execution-state.js';
import type { WorkloadState } from '../messages.js';
import { EXECUTION_STATE, wireExecutionState } from './tables.js';
import { Writer, fieldSize, stringFieldSize, varintSize } from './proto-writer.js';

/** A state's member of ExecutionState's oneof: its field number and substate number. */
const oneofOf = (s: ExecutionState) => ({ field: EXECUTION_STATE[s.state].field, value: wireExecutionState(s).value });

/** A ToServer with an UpdateWorkloadState of `states`, encoded. */
export function encodeWorkloadStates(states: readonly WorkloadState[]): Uint8Array {
  const sizes = states.map(({ instanceName: n, executionState: e }) => {
    const name = [Buffer.byteLength(n.workloadName), Buffer.byteLength(n.agentName), Buffer.byteLength(n.id)];
    const info = Buffer.byteLength(e.additionalInfo);
    const { field, value } = oneofOf(e);
    const nameSize = stringFieldSize(name[0]) + stringFieldSize(name[1]) + stringFieldSize(name[2]);
    const executionSize = fieldSize(info) + varintSize(field << 3) + varintSize(value);
    return { name, nameSize, info, field, value, executionSize, stateSize: fieldSize(nameSize) + fieldSize(executionSize) };
  });
  const updateSize = sizes.reduce((sum, s) => sum + fieldSize(s.stateSize), 0);
  const out = new Writer(fieldSize(updateSize)).field(2, updateSize);
  states.forEach(({ instanceName: n, executionState: e }, i) => {
    const s = sizes[i];
    out.field(1, s.stateSize).field(1, s.nameSize);
    out.string(1, n.workloadName, s.name[0]).string(2, n.agentName, s.name[1]).string(3, n.id, s.name[2]);
    out.field(2, s.executionSize).text(1, e.additionalInfo, s.info).number(s.field, s.value);
  });
  return out.buf;
}
