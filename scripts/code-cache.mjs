// npm run build, last step: V8's code cache of the bundle, so that the agent starts without compiling what
// its modules run when they load. The file is the bundle's SHA-256, then the cache: bin/ank-agent.js uses
// it only for the bundle it was made of.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import vm from 'node:vm';

const bundle = path.resolve('dist/bin/ank-agent.cjs');
const source = readFileSync(bundle, 'utf8');
const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: bundle });
// Loading the modules compiles what they run as they load; nothing of the agent starts.
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(bundle), module, bundle, path.dirname(bundle));
const hash = createHash('sha256').update(source).digest();
writeFileSync('dist/bin/ank-agent.cache', Buffer.concat([hash, script.createCachedData()]));
