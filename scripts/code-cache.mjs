// npm run build, last step: V8's code cache of the run's bundle, so that the agent does not compile what its
// modules run when they load, nor what its first creates run (the start's bundle is small and compiles as it is:
// bin/ank-agent.cjs). Every function of the run is compiled into it, not only those its load runs: a create's code
// otherwise compiles as it first runs, a fifth of the CPU of a fleet's first apply (5 creates: 38 against 31 ms
// of CPU, measured with the agent as shipped). The file is the bundle's CRC-32 and the cache data's CRC-32 (4 bytes
// each, big-endian), then the data: bin/ank-agent.cjs uses it only whole and for the bundle it was made of (V8 does
// not check the data; CRC-32: native and cheap, where loading node:crypto for a SHA-256 cost some 20 ms).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { crc32 } from 'node:zlib';

// V8 takes a code cache only under the flags it was made with: made under the Node options the agent is
// shipped with (the first line of bin/ank-agent.cjs).
const shipped = /^#!\/usr\/bin\/env -S node(.*)$/.exec(readFileSync('bin/ank-agent.cjs', 'utf8').split('\n')[0])?.[1].trim().split(/\s+/).filter(Boolean) ?? [];
if (shipped.join(' ') !== process.execArgv.join(' ')) {
  const again = spawnSync(process.execPath, [...shipped, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(again.status ?? 1);
}

/**
 * The cache of one bundle, every function compiled: V8 compiles them all under --no-lazy, which is lifted again
 * before the data is made (V8 takes a cache only under the flags it was made with). Loading its modules runs their
 * top level; nothing of the agent starts.
 */
function cache(file, cacheFile) {
  const bundle = path.resolve(file);
  const bytes = readFileSync(bundle);
  const source = bytes.toString('utf8');
  v8.setFlagsFromString('--no-lazy');
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: bundle });
  v8.setFlagsFromString('--lazy');
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(bundle), module, bundle, path.dirname(bundle));
  const data = script.createCachedData();
  const check = Buffer.alloc(8);
  check.writeUInt32BE(crc32(bytes), 0);
  check.writeUInt32BE(crc32(data), 4);
  writeFileSync(cacheFile, Buffer.concat([check, data]));
}

cache('dist/bin/ank-agent-run.cjs', 'dist/bin/ank-agent-run.cache');
