// A unit's state as systemd tells it (`systemctl show`, or its PropertiesChanged signals), and the execution state
// of the workload that manages the unit. Pure.
import { type ExecutionState, ExecutionState as State } from '../../execution-state.js';
import type { DbusValue } from './dbus-wire.js';

/** What the agent reads of a unit. */
export interface UnitProps {
  readonly LoadState?: string;
  readonly ActiveState?: string;
  readonly SubState?: string;
  /** How the main process ended: 1 it exited (ExecMainStatus its exit code), 2 killed, 3 dumped (the signal). */
  readonly ExecMainCode?: number;
  readonly ExecMainStatus?: number;
  /** When the unit last became active, in µs of the monotonic clock (0: never). */
  readonly ActiveEnterTimestampMonotonic?: number;
}

type PropName = keyof UnitProps;
const NUMERIC: ReadonlySet<PropName> = new Set(['ExecMainCode', 'ExecMainStatus', 'ActiveEnterTimestampMonotonic']);
export const UNIT_PROPERTIES: readonly PropName[] = ['LoadState', 'ActiveState', 'SubState', 'ExecMainCode', 'ExecMainStatus', 'ActiveEnterTimestampMonotonic'];

/** The systemctl arguments that show `units` as parseShow reads them. */
export const showArgs = (units: readonly string[]): string[] => ['show', `--property=Id,${UNIT_PROPERTIES.join(',')}`, ...units];

/** `systemctl show` of one or more units: the properties of each, by its Id (blocks apart by an empty line). */
export function parseShow(output: string): Map<string, UnitProps> {
  const units = new Map<string, UnitProps>();
  for (const block of output.split(/\n\s*\n/)) {
    const props: Record<string, string | number> = {};
    let id: string | undefined;
    for (const line of block.split('\n')) {
      const eq = line.indexOf('=');
      if (eq < 0) continue;
      const [name, value] = [line.slice(0, eq), line.slice(eq + 1).trim()];
      if (name === 'Id') id = value;
      else if ((UNIT_PROPERTIES as readonly string[]).includes(name)) {
        if (!NUMERIC.has(name as PropName)) props[name] = value;
        else if (/^-?\d+$/.test(value)) props[name] = Number(value);
      }
    }
    if (id) units.set(id, props);
  }
  return units;
}

/** What a PropertiesChanged signal of a unit's object changes of what the agent reads (other properties are passed over). */
export function propsOfSignal(changed: DbusValue): UnitProps {
  const props: Record<string, string | number> = {};
  if (!(changed instanceof Map)) return props;
  for (const name of UNIT_PROPERTIES) {
    const value = changed.get(name);
    if (typeof value === 'string' && !NUMERIC.has(name)) props[name] = value;
    else if ((typeof value === 'number' || typeof value === 'bigint') && NUMERIC.has(name)) props[name] = Number(value);
  }
  return props;
}

/**
 * What the agent knows of a unit, each property with the step it was learnt at: a signal is news as it comes; a
 * `systemctl show` tells what was true when it was asked, so it does not undo a signal heard while it ran.
 */
export interface UnitView {
  readonly props: UnitProps;
  readonly learnt: Readonly<Partial<Record<PropName, number>>>;
}

export const EMPTY_VIEW: UnitView = { props: {}, learnt: {} };

/** `view` with what was learnt at step `at` (a signal: when heard; a show: when asked). */
export function learn(view: UnitView, props: UnitProps, at: number): UnitView {
  const next: Record<string, unknown> = { ...view.props };
  const learnt: Partial<Record<PropName, number>> = { ...view.learnt };
  for (const [name, value] of Object.entries(props) as [PropName, string | number][]) {
    if ((learnt[name] ?? Number.NEGATIVE_INFINITY) > at) continue;
    next[name] = value;
    learnt[name] = at;
  }
  return { props: next as UnitProps, learnt };
}

/** CLD_EXITED: the main process exited by itself; its status is an exit code. */
const EXITED = 1;

/**
 * The workload's state from its unit's: active (any sub-state) Running(Ok), the sub-state said unless it is
 * `running`; inactive with an exit code of 0 or none Succeeded(Ok) (a main process systemd stopped with its
 * signal ended cleanly), with another Failed(ExecFailed) `Exit code: n`; failed Failed(ExecFailed) `Service failed:
 * <sub-state>`; activating Pending(Starting) and deactivating Stopping, each with the sub-state; else Failed(Unknown).
 */
export function unitExecutionState(props: UnitProps): ExecutionState {
  const sub = props.SubState ?? '';
  switch (props.ActiveState) {
    case 'active':
    case 'reloading':
      return State.running(sub === 'running' ? '' : sub);
    case 'inactive': {
      const code = props.ExecMainCode === EXITED ? (props.ExecMainStatus ?? 0) : 0;
      return code === 0 ? { ...State.succeeded(), exitCode: 0 } : { ...State.failed(`Exit code: ${code}`), exitCode: code };
    }
    case 'failed':
      return State.failed(`Service failed: ${sub}`);
    case 'activating':
      return State.starting(sub);
    case 'deactivating':
      return State.stopping(sub);
    default:
      return State.unknown(props.ActiveState ?? 'systemd has not told the unit state');
  }
}

/** Whether the unit became active within `withinUs` of `nowUs` (both µs of the monotonic clock). */
export const activeSince = (props: UnitProps, nowUs: number, withinUs: number): boolean =>
  props.ActiveState === 'active' && (props.ActiveEnterTimestampMonotonic ?? 0) > 0 && nowUs - props.ActiveEnterTimestampMonotonic! <= withinUs;
