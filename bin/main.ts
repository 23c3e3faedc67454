// ank-agent: the command line; when the agent is to connect to a server, its start says hello first
// (bin/start.ts), then the rest of the agent is loaded (bin/run.ts) while the server answers: whoever starts
// the agent and asks the server at once finds it. `main` is the program; importing this module does nothing. As
// shipped, the run is a bundle of its own that bin/ank-agent.cjs loads (`loadRun`).
import { HELP, versionText } from './about.js';
import { readCommandLine } from './command-line.js';
import { end, isEarlyEnd, userErrors } from './exit.js';
import { helloFirst } from './start.js';

/** The program: set up, then the run, which ends the process; what fails before it ends it too. */
export async function main(argv: readonly string[], { loadRun }: { readonly loadRun?: () => typeof import('./run.js') } = {}): Promise<void> {
  // A log reader that went away (EPIPE) costs the lines it would have read, never the agent.
  process.stderr.on('error', () => undefined);
  try {
    const flags = userErrors(() => readCommandLine(argv), true);
    if (flags.help) end({ code: 0, say: HELP });
    if (flags.version) end({ code: 0, say: versionText() });
    const early = flags.manifest === undefined ? await helloFirst(flags) : undefined;
    const { run } = loadRun ? loadRun() : await import('./run.js');
    tuneV8ForTheRun();
    // The process ends in the turn the run did (bin/exit.ts).
    await run(flags, early, end);
  } catch (err) {
    end(isEarlyEnd(err) ? err.outcome : { code: 1, say: `ank-agent: error: ${err instanceof Error ? err.message : String(err)}\n` });
  }
}

/**
 * V8's settings for the run, set once the agent's modules are loaded: any V8 flag given at the start (as
 * `--max-semi-space-size=1` was) makes V8 refuse Node's own code cache, and http2 and tls then compile anew before
 * the hello (measured here: 17.8 against 5.4 ms of CPU to load them).
 * - The young generation stays at its first size (2 MiB), so that the garbage of a burst of work never stays
 *   resident (Node lets it grow to 32 MiB). Growth is asked of the flag at each growth.
 * - Code is optimized after 4 × V8's default budget of work in it: a create runs some hundreds of functions a few
 *   times each, and at the default V8's optimizing compiler spent ~0.6 ms of a create's CPU on its helper threads
 *   on code that was then barely run again. A create costs ~12 % less CPU all told, on the fake podman and on real
 *   Podman, its main thread within the runs' spread. Code that stays hot, as a burst of the server's states runs,
 *   is still optimized.
 */
function tuneV8ForTheRun(): void {
  process.getBuiltinModule('node:v8').setFlagsFromString('--semi-space-growth-factor=1 --interrupt-budget=270336');
}
