// From Podman's container states to execution states (swdd~podman-state-getter-maps-state~3).
import { ExecutionState, exitedWith } from '../../execution-state.js';
import type { Container, StateReading } from '../../ports.js';

const exited = (c: Container): ExecutionState => exitedWith(c.exitCode ?? 0);

type Kind = 'starting' | 'running' | 'exited' | 'stopping' | 'unknown';

/** What a Podman container state means, as both state getters read it. */
function kindOf(state: string): Kind {
  switch (state) {
    case 'created':
    case 'configured':
    case 'initialized':
      return 'starting';
    case 'running':
      return 'running';
    case 'exited':
      return 'exited';
    case 'stopping':
    case 'stopped':
    case 'removing':
      return 'stopping';
    default:
      return 'unknown';
  }
}

/** swdd~podman-state-getter-maps-state~3: Podman's own state word is the additional info, as the released agent gives it. */
export function podmanState(c: Container): ExecutionState {
  const state = (c.state ?? '').toLowerCase();
  switch (kindOf(state)) {
    case 'starting':
      return ExecutionState.starting(state);
    case 'running':
      return ExecutionState.running();
    case 'exited':
      return exited(c);
    case 'stopping':
      return ExecutionState.stopping(state);
    case 'unknown':
      return ExecutionState.unknown(state);
  }
}

/** swdd~podman-kube-state-getter-maps-state~2 */
export function kubeContainerState(c: Container): ExecutionState {
  switch (kindOf((c.state ?? '').toLowerCase())) {
    case 'starting':
      return ExecutionState.starting('starting container');
    case 'running':
      return ExecutionState.running();
    case 'exited':
      return exited(c);
    case 'stopping':
      return ExecutionState.stopping('stopping container');
    case 'unknown':
      return ExecutionState.unknown('unknown container state');
  }
}

const PRIORITY: Array<(s: ExecutionState) => boolean> = [
  (s) => s.state === 'Failed' && s.substate === 'ExecFailed',
  (s) => s.state === 'Pending',
  (s) => s.state === 'Failed',
  (s) => s.state === 'Running',
  (s) => s.state === 'Stopping',
  (s) => s.state === 'Succeeded',
];
const priority = (s: ExecutionState) => PRIORITY.findIndex((p) => p(s));

/**
 * swdd~podman-kube-state-getter-combines-states~2, swdd~podman-kube-state-getter-treats-missing-pods-as-unknown~1:
 * the state of the lowest priority among the pods' containers, the infra container as any other (as the
 * released agent does); a missing pod counts as one unknown container, so a workload whose pods were
 * removed from outside is Failed(Unknown), never Removed (which would make the server forget it). A
 * workload that has no pod at all is Failed(Lost), as the released agent reports it.
 */
export function kubeWorkloadState(pods: readonly string[], containers: Iterable<Container>): ExecutionState {
  const all = [...containers];
  const states = pods.flatMap((pod) => {
    const inPod = containersOf([pod], all);
    return inPod.length === 0 ? [ExecutionState.unknown('unknown container state')] : inPod.map(kubeContainerState);
  });
  return states.reduce((low, s) => (priority(s) < priority(low) ? s : low), states[0] ?? ExecutionState.lost());
}

/** The containers of the given pods. */
export function containersOf(pods: readonly string[], containers: Iterable<Container>): Container[] {
  const inPods: Container[] = [];
  for (const c of containers) if (c.pod !== undefined && c.pod !== '' && pods.some((pod) => pod === c.pod || pod.startsWith(c.pod!))) inPods.push(c);
  return inPods;
}

/** A Podman container is `stopped` for a moment (~150 ms) on its way to `exited`. */
const isTransient = (c: Container) => c.state === 'stopped';

/** swdd~podman-state-getter-uses-podmancli~1, swdd~podman-state-getter-returns-lost-state~1: the state getter of the podman runtime. */
export const podmanReading =
  (id: string) =>
  (containers: ReadonlyMap<string, Container>): StateReading => {
    const c = containers.get(id);
    return c ? { state: podmanState(c), transient: isTransient(c) } : { state: ExecutionState.lost(), transient: false };
  };

/** swdd~podman-kube-state-getter-uses-container-states~1: the state getter of the podman-kube runtime. */
export const kubeReading =
  (pods: readonly string[]) =>
  (containers: ReadonlyMap<string, Container>): StateReading => ({
    state: kubeWorkloadState(pods, containers.values()),
    transient: containersOf(pods, containers.values()).some(isTransient),
  });
