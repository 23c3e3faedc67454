import type { ExecutionState } from '../../lib/execution-state.js';
import type { WorkloadState } from '../../lib/messages.js';
import {
  type AddCondition,
  type DeleteCondition,
  type DeletedWorkload,
  type RestartPolicy,
  type WorkloadSpec,
  instanceId,
  noAccess,
} from '../../lib/workload.js';

export const AGENT = 'agent_A';

export interface WorkloadOptions {
  agent?: string;
  runtime?: string;
  config?: string;
  dependencies?: Record<string, AddCondition>;
  restartPolicy?: RestartPolicy;
}

/** A workload spec whose id is the SHA-256 of its runtime config, as the server computes it. */
export function workload(name: string, o: WorkloadOptions = {}): WorkloadSpec {
  const runtimeConfig = o.config ?? `image: ${name}`;
  return {
    instanceName: { workloadName: name, agentName: o.agent ?? AGENT, id: instanceId(runtimeConfig) },
    runtime: o.runtime ?? 'fake',
    runtimeConfig,
    restartPolicy: o.restartPolicy ?? 'Never',
    dependencies: o.dependencies ?? {},
    tags: {},
    controlInterfaceAccess: noAccess,
    files: [],
  };
}

export const deleted = (spec: WorkloadSpec, dependencies: Record<string, DeleteCondition> = {}): DeletedWorkload => ({
  instanceName: spec.instanceName,
  dependencies,
});

export const stateOf = (spec: WorkloadSpec, executionState: ExecutionState): WorkloadState => ({ instanceName: spec.instanceName, executionState });
