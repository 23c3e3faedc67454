// A systemd workload's runtime config: the unit it manages, the state it asks of it, and the general options
// of systemctl that say which systemd that is. Pure.
import { RuntimeConfigError, document, list, text } from '../base/run-config.js';

export type DesiredUnitState = 'running' | 'stopped' | 'restarted';

export interface UnitConfig {
  /** The unit, with its type's suffix (`nginx.service`). */
  readonly serviceName: string;
  readonly desiredState: DesiredUnitState;
  /** systemctl's (and journalctl's) general options: another manager (`--user`), host or container. */
  readonly generalOptions: readonly string[];
}

/** The kinds of units systemd has: a unit name ends with one. */
const UNIT_SUFFIXES = ['.service', '.timer', '.socket', '.mount', '.target', '.path', '.scope', '.slice', '.swap', '.automount', '.device'];
const DESIRED_STATES: readonly DesiredUnitState[] = ['running', 'stopped', 'restarted'];
/** systemd's own bound on a unit name. */
const MAX_UNIT_NAME = 255;

/**
 * The general options a workload may give: which systemd (`--user`, `--system`), on which host or container
 * (`--host`/`-H`, `--machine`/`-M`, each with its value). Nothing else: systemctl runs as root, and an option such
 * as `--root` or `--job-mode` would let a config do more than manage its unit.
 */
const SCOPE_FLAGS = new Set(['--user', '--system']);
const SCOPE_OPTIONS = new Set(['--host', '-H', '--machine', '-M']);
const SCOPE_VALUE = /^[A-Za-z0-9@_.%+][A-Za-z0-9@_.:%+-]*$/;

export function parseUnitConfig(runtimeConfig: string): UnitConfig {
  const doc = document(runtimeConfig);
  const serviceName = text(doc, 'serviceName');
  if (serviceName.length > MAX_UNIT_NAME || !/^[A-Za-z0-9@_:.-]+$/.test(serviceName)) {
    throw new RuntimeConfigError(`The service name '${serviceName.slice(0, 80)}' may hold only letters, digits and @ _ : . -`);
  }
  if (serviceName.startsWith('-') || !UNIT_SUFFIXES.some((suffix) => serviceName.endsWith(suffix) && serviceName.length > suffix.length)) {
    throw new RuntimeConfigError(`The service name '${serviceName}' must be a unit name ending in a unit type (${UNIT_SUFFIXES.join(', ')}).`);
  }
  const desired = doc.desiredState ?? 'running';
  if (typeof desired !== 'string' || !DESIRED_STATES.includes(desired as DesiredUnitState)) {
    throw new RuntimeConfigError(`The runtime config field 'desiredState' must be one of ${DESIRED_STATES.join(', ')}, not '${String(desired)}'.`);
  }
  return { serviceName, desiredState: desired as DesiredUnitState, generalOptions: scopeOptions(list(doc, 'generalOptions')) };
}

/** The general options as given, each checked; `--host=x` and `--host x` both. */
function scopeOptions(options: readonly string[]): string[] {
  for (let i = 0; i < options.length; i++) {
    const option = options[i];
    const [flag, inline] =
      option.startsWith('--') && option.includes('=') ? [option.slice(0, option.indexOf('=')), option.slice(option.indexOf('=') + 1)] : [option, undefined];
    if (SCOPE_FLAGS.has(flag) && inline === undefined) continue;
    if (!SCOPE_OPTIONS.has(flag)) {
      throw new RuntimeConfigError(`The general option '${option}' is not one the systemd runtime takes (${[...SCOPE_FLAGS, ...SCOPE_OPTIONS].join(', ')}).`);
    }
    const value = inline ?? options[++i];
    if (value === undefined || !SCOPE_VALUE.test(value))
      throw new RuntimeConfigError(`The general option '${flag}' needs a host or machine name, not '${value ?? ''}'.`);
  }
  return [...options];
}
