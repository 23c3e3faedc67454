// swdd~agent-transforms-update-workload-message-to-workload-operations~1
import type { DeletedWorkload, WorkloadSpec } from './workload.js';

export type WorkloadOperation =
  | { readonly kind: 'create'; readonly spec: WorkloadSpec }
  | { readonly kind: 'update'; readonly spec: WorkloadSpec; readonly deleted: DeletedWorkload }
  /** The delete half of an update whose create must still wait (swdd~agent-handles-update-with-fulfilled-delete~1). */
  | { readonly kind: 'updateDeleteOnly'; readonly spec: WorkloadSpec; readonly deleted: DeletedWorkload }
  | { readonly kind: 'delete'; readonly deleted: DeletedWorkload };

export const operationTarget = (op: WorkloadOperation): string =>
  op.kind === 'delete' ? op.deleted.instanceName.workloadName : op.spec.instanceName.workloadName;
