// What the Podman module reads of the agent config and the environment (its `settings`; lib/config.ts checks the
// file against it). Without imports of the runtime, so that the agent's start can check a config with it.
import type { Declared } from '../../config.js';
import { maxCreatesIn } from '../containers/max-creates.js';

export interface PodmanSettings {
  /** `podman_service` (true unless false): calls go through Podman's service; false: a Podman process for every call. */
  readonly service: boolean;
  /** `ANKAIOS_PODMAN_MAX_CONCURRENT_CREATES`: the creates Podman runs at once. */
  readonly maxCreates: number;
}

export const podmanSettings: Declared<PodmanSettings> = {
  keys: { podman_service: { type: 'a boolean', is: (value) => typeof value === 'boolean' } },
  parse: (given, env) => ({ service: given.podman_service !== false, maxCreates: maxCreatesIn(env, 'PODMAN') }),
};
