#!/usr/bin/env node
// Entry point: runs the agent as built by `npm install` (see README): one bundled file, which starts
// about a third faster than the compiled modules it is made of.
import { existsSync } from 'node:fs';
import v8 from 'node:v8';

// Keeps the heap near what is live: without it, the young generation a burst of work (hundreds of
// workloads created at once) grew to stays resident for good (npm run bench -- --only=scaling).
v8.setFlagsFromString('--optimize-for-size');
// The agent waits on I/O; V8's optimizing compiler would keep ~6 MiB of code and compiler memory
// for start-up code that never runs hot again.
v8.setFlagsFromString('--no-opt');

const built = ['../dist/bin/ank-agent.mjs', '../dist/bin/main.js'].map((file) => new URL(file, import.meta.url)).find((url) => existsSync(url));
if (!built) {
  process.stderr.write('ank-agent: the agent is not built yet: run `npm install` (or `npm run build`) in the project folder.\n');
  process.exit(1);
}
await import(built.href);
