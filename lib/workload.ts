// Workload objects as the agent uses them, independent of the wire format and of manifests.
import { createHash } from 'node:crypto';

export interface WorkloadInstanceName {
  readonly workloadName: string;
  readonly agentName: string;
  /** SHA-256 of the runtime config (swdd~api-workload-execution-instance-naming~1). */
  readonly id: string;
}

/** swdd~api-workload-execution-instance-naming~1: the lowercase hex SHA-256 of the rendered runtime config. */
export const instanceId = (runtimeConfig: string): string => createHash('sha256').update(runtimeConfig).digest('hex');

/**
 * swdd~agent-naming-convention~1: the one rule for workload and agent names (and config keys): 1 to 63
 * letters, digits, '-' or '_', the length the server allows for these fields. An agent name is checked
 * by it at start, so a name the agent starts with never makes its workloads fail.
 */
export const NAME = /^[a-zA-Z0-9_-]{1,63}$/;
export const NAME_RULE = "1 to 63 letters, digits, '-' or '_'";
const ID = /^[0-9a-f]{64}$/;

/**
 * Why an instance name from outside cannot be used, or undefined when it can: the names become container
 * names and folder names, so nothing but the allowed characters gets through (swdd~api-workload-naming-convention~1,
 * swdd~api-agent-naming-convention~1, swdd~api-workload-execution-instance-naming~1).
 */
export function instanceNameProblem(n: WorkloadInstanceName): string | undefined {
  if (!NAME.test(n.workloadName)) return `Invalid workload name '${n.workloadName}': a workload name has ${NAME_RULE}.`;
  return (
    agentNameProblem(n.agentName) ??
    (ID.test(n.id) ? undefined : `Invalid instance id '${n.id}': an instance id is the SHA-256 of the runtime config, 64 lowercase hex digits.`)
  );
}

/** Why an agent name cannot be used, or undefined when it can. */
export const agentNameProblem = (name: string): string | undefined =>
  NAME.test(name) ? undefined : `Invalid agent name '${name}': an agent name has ${NAME_RULE}.`;

/** `<workloadName>.<id>.<agentName>`: the name containers and folders carry. */
export const instanceKey = (n: WorkloadInstanceName): string => `${n.workloadName}.${n.id}.${n.agentName}`;

export const sameInstance = (a: WorkloadInstanceName, b: WorkloadInstanceName): boolean =>
  a.workloadName === b.workloadName && a.id === b.id && a.agentName === b.agentName;

/** Parses `<workloadName>.<id>.<agentName>`; undefined when the text is not of that form. */
export function parseInstanceKey(key: string): WorkloadInstanceName | undefined {
  const m = /^([^.]+)\.([^.]*)\.([^.]+)$/.exec(key);
  return m ? { workloadName: m[1], id: m[2], agentName: m[3] } : undefined;
}

export type AddCondition = 'Running' | 'Succeeded' | 'Failed';
export type DeleteCondition = 'Running' | 'NotPendingNorRunning';
export type RestartPolicy = 'Never' | 'OnFailure' | 'Always';
export type ReadWrite = 'Nothing' | 'Read' | 'Write' | 'ReadWrite';

export type AccessRule =
  | { readonly kind: 'state'; readonly operation: ReadWrite; readonly filterMasks: readonly string[] }
  | { readonly kind: 'log'; readonly workloadNames: readonly string[] };

export interface ControlInterfaceAccess {
  readonly allowRules: readonly AccessRule[];
  readonly denyRules: readonly AccessRule[];
}

export interface WorkloadFile {
  readonly mountPoint: string;
  readonly data?: string;
  readonly binaryData?: string;
}

/**
 * A workload as the desired state declares it (ank_base.Workload): `agent` and `runtimeConfig` may
 * still hold `{{…}}` templates over the configs the workload names (alias → config key).
 */
export interface Workload {
  readonly agent: string;
  readonly runtime: string;
  readonly runtimeConfig: string;
  readonly restartPolicy: RestartPolicy;
  readonly dependencies: Readonly<Record<string, AddCondition>>;
  readonly tags: Readonly<Record<string, string>>;
  readonly controlInterfaceAccess: ControlInterfaceAccess;
  readonly configs: Readonly<Record<string, string>>;
  readonly files: readonly WorkloadFile[];
}

/** A workload the server assigned to this agent (an AddedWorkload): rendered, named, its agent known. */
export interface WorkloadSpec extends Omit<Workload, 'agent' | 'configs'> {
  readonly instanceName: WorkloadInstanceName;
}

/** A workload the server removes from this agent, with the conditions its dependents set. */
export interface DeletedWorkload {
  readonly instanceName: WorkloadInstanceName;
  readonly dependencies: Readonly<Record<string, DeleteCondition>>;
}

/** swdd~api-workload-needs-control-interface~1 */
export const needsControlInterface = (spec: WorkloadSpec): boolean => spec.controlInterfaceAccess.allowRules.length > 0;

export const noAccess: ControlInterfaceAccess = { allowRules: [], denyRules: [] };

/** A workload with every field at its default (what the wire means by a field left out). */
export const EMPTY_WORKLOAD: Workload = {
  agent: '',
  runtime: '',
  runtimeConfig: '',
  restartPolicy: 'Never',
  dependencies: {},
  tags: {},
  controlInterfaceAccess: noAccess,
  configs: {},
  files: [],
};

/** A config item of the desired state: a string, a list or a mapping of them. */
export type ConfigValue = string | ConfigValue[] | { [key: string]: ConfigValue };

/** The desired state as declared (ank_base.State): workloads by name, templates unrendered. */
export interface DeclaredState {
  readonly apiVersion: string;
  readonly workloads: Readonly<Record<string, Workload>>;
  readonly configs: Readonly<Record<string, ConfigValue>>;
}
