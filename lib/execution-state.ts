// Execution states of workloads (`swdd~api-workload-states-supported-states~1`).

type Variant<S extends string, Sub extends string> = { readonly state: S; readonly substate: Sub };

/** What the agent's health checks say of a workload (this agent's own, beyond the released agent). */
export type HealthStatus = 'starting' | 'healthy' | 'unhealthy';

/**
 * A state as the server sees it (state, substate, additional info), with what the agent knows beside it for
 * its own readers (the metrics, the status view), never sent: how the container's run ended, what its
 * health checks say, when the agent heard of the change.
 */
export type ExecutionState = {
  readonly additionalInfo: string;
  /** The exit code of the run a Succeeded or Failed(ExecFailed) state tells of. */
  readonly exitCode?: number;
  /** Set for a workload with health checks only. */
  readonly health?: HealthStatus;
  /**
   * When the agent heard of the change the state shows (ms, the scheduler's clock): an event's own time, the
   * poll that found it, a check's result. The metrics time the report by it.
   */
  readonly heardAt?: number;
} & (
  | Variant<'AgentDisconnected', 'AgentDisconnected'>
  | Variant<'Pending', 'Initial' | 'WaitingToStart' | 'Starting' | 'StartingFailed'>
  | Variant<'Running', 'Ok'>
  | Variant<'Stopping', 'Stopping' | 'WaitingToStop' | 'RequestedAtRuntime' | 'DeleteFailed'>
  | Variant<'Succeeded', 'Ok'>
  | Variant<'Failed', 'ExecFailed' | 'Unknown' | 'Lost'>
  | Variant<'NotScheduled', 'NotScheduled'>
  | Variant<'Removed', 'Removed'>
);

export type StateName = ExecutionState['state'];
export type Substate = ExecutionState['substate'];

const make =
  <E extends ExecutionState>(state: E['state'], substate: E['substate']) =>
  (additionalInfo = ''): ExecutionState =>
    ({ state, substate, additionalInfo }) as ExecutionState;

export const ExecutionState = {
  agentDisconnected: make('AgentDisconnected', 'AgentDisconnected'),
  initial: make('Pending', 'Initial'),
  waitingToStart: make('Pending', 'WaitingToStart'),
  starting: make('Pending', 'Starting'),
  startingFailed: make('Pending', 'StartingFailed'),
  running: make('Running', 'Ok'),
  stopping: make('Stopping', 'Stopping'),
  waitingToStop: make('Stopping', 'WaitingToStop'),
  stoppingRequested: make('Stopping', 'RequestedAtRuntime'),
  deleteFailed: make('Stopping', 'DeleteFailed'),
  succeeded: make('Succeeded', 'Ok'),
  failed: make('Failed', 'ExecFailed'),
  unknown: make('Failed', 'Unknown'),
  lost: make('Failed', 'Lost'),
  notScheduled: make('NotScheduled', 'NotScheduled'),
  removed: make('Removed', 'Removed'),
} as const;

/** A container's run that ended with `code`: Succeeded for 0, otherwise Failed(ExecFailed) naming it as the released agent does. */
export const exitedWith = (code: number): ExecutionState => ({
  ...(code === 0 ? ExecutionState.succeeded() : ExecutionState.failed(`Exit code: '${code}'`)),
  exitCode: code,
});

/** `Pending(Starting)`, with the additional info after a colon when there is one. */
export function formatState(s: ExecutionState): string {
  const name = s.state === s.substate && s.state !== 'Stopping' ? s.state : `${s.state}(${s.substate})`;
  return s.additionalInfo ? `${name}: ${s.additionalInfo}` : name;
}

export const is = (s: ExecutionState | undefined, state: StateName, substate?: Substate): boolean =>
  s !== undefined && s.state === state && (substate === undefined || s.substate === substate);

/** `state`, heard at `at` (unchanged when `at` is not known). */
export const heardAt = <S extends ExecutionState>(state: S, at: number | undefined): S => (at === undefined ? state : { ...state, heardAt: at });

export const sameState = (a: ExecutionState, b: ExecutionState): boolean =>
  a.state === b.state && a.substate === b.substate && a.additionalInfo === b.additionalInfo;

/**
 * swdd~api-workload-state-transitions~1: a workload the agent is stopping (`Stopping(RequestedAtRuntime)`,
 * `Stopping(WaitingToStop)`) stays so when it reports running, succeeded or failed, so the state does not
 * flip while the stop is under way. Podman's own `stopping` is no stop the agent ordered: a container
 * stopped from outside ends as its exit says, and its restart policy and dependants act on that.
 */
export function transition(current: ExecutionState | undefined, incoming: ExecutionState): ExecutionState {
  const stopping = is(current, 'Stopping', 'RequestedAtRuntime') || is(current, 'Stopping', 'WaitingToStop');
  const settled = ['Running', 'Succeeded', 'Failed'].includes(incoming.state);
  return stopping && settled ? current! : incoming;
}

/** Whether an instance in this state is forgotten wherever states are kept: it is `Removed` (the one place that decides so). */
export const forgotten = (state: ExecutionState): boolean => state.state === 'Removed';

/** Stores an instance's latest state under `key`, or forgets the instance. */
export function keepLatest<V>(map: Map<string, V>, key: string, state: ExecutionState, value: V): void {
  if (forgotten(state)) map.delete(key);
  else map.set(key, value);
}
