import { expect } from 'chai';
import { AddCondition, ExecutionStateSchema, ReadWriteEnum, RestartPolicy } from '../../proto/gen/ank_base_pb.js';
import { DeleteCondition } from '../../proto/gen/grpc_api_pb.js';
import { ADD_CONDITION, DELETE_CONDITION, EXECUTION_STATE, type EnumTable, READ_WRITE, RESTART_POLICY } from '../../lib/codec/tables.js';

/** The table's rows as [wire number, text], and the generated enum's as [number, name]. */
const rowsOf = <D extends string>(table: EnumTable<D, number>, domains: readonly D[]) => domains.map((d) => [table.toWire(d), table.toText(d)]);
const membersOf = (e: Record<string, string | number>) =>
  Object.entries(e)
    .filter(([, n]) => typeof n === 'number')
    .map(([name, n]) => [n, name]);

describe('the wire tables (lib/codec/tables.ts), written out beside the generated code', () => {
  // swdd~agent-manager-listens-requests-from-server~1
  it('give each enum member the number the generated code has for it', () => {
    expect(rowsOf(RESTART_POLICY, ['Never', 'OnFailure', 'Always'])).to.deep.equal(membersOf(RestartPolicy));
    expect(rowsOf(ADD_CONDITION, ['Running', 'Succeeded', 'Failed'])).to.deep.equal(membersOf(AddCondition));
    expect(rowsOf(DELETE_CONDITION, ['Running', 'NotPendingNorRunning'])).to.deep.equal(membersOf(DeleteCondition));
    expect(rowsOf(READ_WRITE, ['Nothing', 'Read', 'Write', 'ReadWrite']).map(([n]) => n)).to.deep.equal(membersOf(ReadWriteEnum).map(([n]) => n));
  });

  // swdd~agent-sends-workload-states-of-its-workloads-to-server~2
  it("give each execution state the field number of its member of ExecutionState's oneof, and every member a state", () => {
    for (const row of Object.values(EXECUTION_STATE)) expect(row.field, row.case).to.equal(ExecutionStateSchema.field[row.case].number);
    expect(Object.values(EXECUTION_STATE).map((r) => r.case)).to.have.members(ExecutionStateSchema.oneofs[0].fields.map((f) => f.localName));
  });
});
