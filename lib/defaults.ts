// Defaults the help and version texts name: a module without imports, so `--help` and `--version`
// answer without loading the agent.
export const DEFAULT_SERVER_URL = 'https://127.0.0.1:25551';
export const DEFAULT_CONFIG_PATH = '/etc/ankaios/ank-agent.conf';
/** Creates an engine runs at once unless `ANKAIOS_<ENGINE>_MAX_CONCURRENT_CREATES` says otherwise (the next Ankaios agent's default). */
export const DEFAULT_MAX_CREATES = 4;
/** The version the agent says on each protocol line, by the name a server gives the line. */
export const LINE_VERSIONS = { '1': '1.0.1', '0.8': '0.8.0' } as const;
/** When images are collected unless `image_gc` says otherwise: above 85 % used, down to 80 %, none younger than 2 min (kubelet's). */
export const KUBELET_IMAGE_GC = { high: 85, low: 80, minAgeMs: 120_000 } as const;
