// The one way out of the program, shared by its start (bin/main.ts) and its run (bin/run.ts).
import { ConfigError } from '../lib/config.js';
import { ManifestError } from '../lib/desired-state.js';
import { HELP } from './about.js';

/** How the program ends: its exit code, and what it says on the way out (stdout for 0, stderr otherwise). */
export interface Outcome {
  readonly code: number;
  readonly say?: string;
}

/** An end before the agent runs (a user's mistake, an endpoint that cannot listen), thrown to the one way out. */
export class EarlyEnd extends Error {
  constructor(readonly outcome: Outcome) {
    super(outcome.say);
  }
}

/** An EarlyEnd, of this module or of the same module in the run's bundle (scripts/bundle.mjs). */
export const isEarlyEnd = (err: unknown): err is EarlyEnd => err instanceof Error && typeof (err as Partial<EarlyEnd>).outcome?.code === 'number';

/** The one way out: what the program ends with is said, then the process ends with its code, in the same turn. */
export function end({ code, say }: Outcome): never {
  if (say) (code === 0 ? process.stdout : process.stderr).write(say);
  process.exit(code);
}

/** Runs `body`, turning the user's mistakes into a clear message and exit code 1. */
export function userErrors<T>(body: () => T, showHelp = false): T {
  try {
    return body();
  } catch (err) {
    const help = showHelp || (err instanceof ConfigError && err.showHelp);
    if (err instanceof ConfigError || err instanceof ManifestError || showHelp)
      throw new EarlyEnd({ code: 1, say: `ank-agent: error: ${(err as Error).message}\n${help ? HELP : ''}` });
    throw err;
  }
}
