// The agent as shipped: what the end-to-end specs and the bench start (the bundle `npm run build` made).
import path from 'node:path';

export const BIN = path.resolve('bin/ank-agent.cjs');
