// ank-agent: the command line; when the agent is to connect to a server, its start says hello first
// (bin/start.ts), then the rest of the agent is loaded (bin/run.ts) while the server answers: whoever starts
// the agent and asks the server at once finds it. `main` is the program; importing this module does nothing. As
// shipped, the run is a bundle of its own that bin/ank-agent.js loads (`loadRun`).
import { HELP, versionText } from './about.js';
import { readCommandLine } from './command-line.js';
import { end, isEarlyEnd, userErrors } from './exit.js';
import { helloFirst } from './start.js';

/** The program: set up, then the run, which ends the process; what fails before it ends it too. */
export async function main(argv: readonly string[], { loadRun }: { readonly loadRun?: () => typeof import('./run.js') } = {}): Promise<void> {
  try {
    const flags = userErrors(() => readCommandLine(argv), true);
    if (flags.help) end({ code: 0, say: HELP });
    if (flags.version) end({ code: 0, say: versionText() });
    const early = flags.manifest === undefined ? await helloFirst(flags) : undefined;
    const { run } = loadRun ? loadRun() : await import('./run.js');
    await run(flags, early);
  } catch (err) {
    end(isEarlyEnd(err) ? err.outcome : { code: 1, say: `ank-agent: error: ${err instanceof Error ? err.message : String(err)}\n` });
  }
}
