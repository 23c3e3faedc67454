#!/usr/bin/env node
// Entry point: --help and --version answer from a small module; anything else runs the agent as built by
// `npm ci` (see README): one bundled file, which starts faster than the compiled modules it is made of.
import { existsSync } from 'node:fs';

const args = process.argv.slice(2);
const fromDist = (file) => new URL(`../dist/bin/${file}`, import.meta.url);
const notBuilt = () => {
  process.stderr.write('ank-agent: the agent is not built yet: run `npm ci` (or `npm run build`) in the project folder.\n');
  process.exit(1);
};

if (args.length > 0 && args.every((a) => a === '--help' || a === '--version')) {
  if (!existsSync(fromDist('about.js'))) notBuilt();
  const { HELP, versionText } = await import(fromDist('about.js').href);
  process.stdout.write(args[0] === '--help' ? HELP : versionText());
} else {
  const built = [fromDist('ank-agent.mjs'), fromDist('main.js')].find((url) => existsSync(url));
  if (!built) notBuilt();
  const { main } = await import(built.href);
  main(args);
}
