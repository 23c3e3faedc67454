// How many creates an engine runs at once, as the next Ankaios agent reads it: `ANKAIOS_<ENGINE>_MAX_CONCURRENT_CREATES`.
// Read by the container modules' settings (a module without imports of the runtimes, so the start can read it).
import { ConfigError } from '../../config.js';
import { DEFAULT_MAX_CREATES } from '../../defaults.js';

/** `ANKAIOS_<ENGINE>_MAX_CONCURRENT_CREATES`: a whole number from 1 (DEFAULT_MAX_CREATES unless given); throws ConfigError naming a value that is not. */
export function maxCreatesIn(env: Readonly<Record<string, string | undefined>>, engine: string): number {
  const variable = `ANKAIOS_${engine}_MAX_CONCURRENT_CREATES`;
  const given = env[variable];
  if (given === undefined || given === '') return DEFAULT_MAX_CREATES;
  if (!/^\d{1,4}$/.test(given) || Number(given) < 1) throw new ConfigError(`${variable} is '${given}': give a whole number from 1 to 9999.`);
  return Number(given);
}
