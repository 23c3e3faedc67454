#!/usr/bin/env node
// Entry point: runs the compiled agent (built by `npm install`, see README).
import { existsSync } from 'node:fs';

const main = new URL('../dist/bin/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('ank-agent: the agent is not built yet: run `npm install` (or `npm run build`) in the project folder.\n');
  process.exit(1);
}
await import(main.href);
