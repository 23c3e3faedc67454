// What the runtime modules read of the agent config, for the start to check a config file before the hello:
// each module's declaration from its folder's settings.ts (light: the start carries none of the runtimes' code).
// The modules themselves are bin/wiring.ts's list; spec/bin/settings.spec.ts checks that the two agree.
import type { Declarations, Declared } from '../lib/config.js';
import { containerdSettings } from '../lib/runtimes/containerd/settings.js';
import { podmanSettings } from '../lib/runtimes/podman/settings.js';

/** By module, as its first runtime names it. */
export const RUNTIME_SETTINGS: Declarations = new Map<string, Declared>([
  ['podman', podmanSettings],
  ['containerd', containerdSettings],
]);
