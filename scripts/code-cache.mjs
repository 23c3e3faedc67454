// npm run build, last step: V8's code cache of the bundle, so that the agent starts without compiling what
// its modules run when they load. The file is the bundle's SHA-256, then the cache: bin/ank-agent.js uses
// it only for the bundle it was made of.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import vm from 'node:vm';

// V8 takes a code cache only under the flags it was made with: made under the Node options the agent is
// shipped with (the first line of bin/ank-agent.js).
const shipped = /^#!\/usr\/bin\/env -S node(.*)$/.exec(readFileSync('bin/ank-agent.js', 'utf8').split('\n')[0])?.[1].trim().split(/\s+/).filter(Boolean) ?? [];
if (shipped.join(' ') !== process.execArgv.join(' ')) {
  const again = spawnSync(process.execPath, [...shipped, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(again.status ?? 1);
}

const bundle = path.resolve('dist/bin/ank-agent.cjs');
const source = readFileSync(bundle, 'utf8');
const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: bundle });
// Loading the modules compiles what they run as they load; nothing of the agent starts.
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(bundle), module, bundle, path.dirname(bundle));
const hash = createHash('sha256').update(source).digest();
writeFileSync('dist/bin/ank-agent.cache', Buffer.concat([hash, script.createCachedData()]));
