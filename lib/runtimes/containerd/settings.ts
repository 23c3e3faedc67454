// What the containerd module reads of the agent config and the environment (its `settings`; lib/config.ts checks
// the file against it). Without imports of the runtime, so that the agent's start can check a config with it.
import type { Declared } from '../../config.js';
import { maxCreatesIn } from '../containers/max-creates.js';

export interface ContainerdSettings {
  /** `containerd = { namespace, address }`: nerdctl's general options for every containerd workload (its own generalOptions win). */
  readonly scope: readonly string[];
  /** `ANKAIOS_CONTAINERD_MAX_CONCURRENT_CREATES`: the creates containerd runs at once. */
  readonly maxCreates: number;
}

const SCOPE_KEYS = new Set(['namespace', 'address']);

/** Agent config `containerd = { namespace, address }` as nerdctl's general options. */
const containerdScope = (table: Readonly<Record<string, string>> = {}): string[] => Object.entries(table).flatMap(([key, value]) => [`--${key}`, value]);

export const containerdSettings: Declared<ContainerdSettings> = {
  keys: {
    containerd: {
      type: 'a table of namespace and address (strings)',
      is: (value) =>
        typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value) &&
        Object.entries(value).every(([k, v]) => SCOPE_KEYS.has(k) && typeof v === 'string'),
    },
  },
  parse: (given, env) => ({
    scope: containerdScope(given.containerd as Readonly<Record<string, string>> | undefined),
    maxCreates: maxCreatesIn(env, 'CONTAINERD'),
  }),
};
