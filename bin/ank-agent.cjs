#!/usr/bin/env node
// Entry point: --help and --version answer from a small module; anything else runs the agent as `npm ci`
// built it (see README): two bundled files, its start (small: it says hello, compiled as it is) and its run (compiled
// from V8's code cache made of it, so that it does not compile what its modules run as they load). Without the bundles,
// or when the compiled modules are newer (a developer ran tsc alone), those modules run instead.
// No Node option: one would make V8 refuse Node's own code cache (bin/main.ts keeps the young generation small
// once the agent is loaded). CommonJS: an ES module as the entry costs Node's start some 8 ms more.
// Node's modules taken as they are, not imported: an import of a built-in module makes an ES module of it, which
// reads every export (node:fs's streams among them) and costs the start some 16 ms of CPU.
const { closeSync, constants, existsSync, fstatSync, openSync, readFileSync, statSync } = process.getBuiltinModule('node:fs');
const { createRequire } = process.getBuiltinModule('node:module');
const { pathToFileURL } = process.getBuiltinModule('node:url');
const path = process.getBuiltinModule('node:path');
const vm = process.getBuiltinModule('node:vm');

const args = process.argv.slice(2);
const dist = (file) => path.join(__dirname, '..', 'dist', 'bin', file);
/** An ES module of dist/bin (the unbundled modules, --help and --version), imported. */
const importDist = (file) => import(pathToFileURL(dist(file)).href);
const notBuilt = () => {
  process.stderr.write('ank-agent: the agent is not built yet: run `npm ci` (or `npm run build`) in the project folder.\n');
  process.exit(1);
};
const newer = (a, b) => statSync(a).mtimeMs > statSync(b).mtimeMs;

/** Said under --debug only: how the bundle was compiled. */
const debug = (text) => args.some((a) => a === '--debug' || a.startsWith('--debug=')) && process.stderr.write(`ank-agent: ${text}\n`);

/**
 * The bytes of a regular file, or undefined: a FIFO, a device or a folder in its place (opened without blocking,
 * so that a FIFO never holds the start), or a file that cannot be read.
 */
function regularFile(file) {
  let fd;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
    return fstatSync(fd).isFile() ? readFileSync(fd) : undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The code cache's data when the cache is whole and was made of exactly `bundle`: V8 does not check the data it is
 * given, and a damaged cache crashes it (SIGSEGV, SIGTRAP) or runs wrong code. The file is the bundle's CRC-32, the
 * data's CRC-32 (4 bytes each, big-endian), then the data (scripts/code-cache.mjs).
 */
function cacheOf(bundle, cacheFile) {
  const cache = regularFile(cacheFile);
  if (!cache) return void debug('no code cache (or not a regular file): compiling the bundle without it.');
  // zlib is loaded for its CRC-32 only here, once the hello went out.
  const { crc32 } = process.getBuiltinModule('node:zlib');
  if (cache.length <= 8 || cache.readUInt32BE(0) !== crc32(bundle)) return void debug('the code cache was made of another bundle: compiling without it.');
  const data = cache.subarray(8);
  if (cache.readUInt32BE(4) !== crc32(data)) return void debug('the code cache is damaged (its data does not match its checksum): compiling without it.');
  return data;
}

/**
 * The bundle, compiled with its code cache when one is given, whole and made of exactly this bundle. V8 itself
 * rejects a cache made by another Node version or under other options; the bundle then compiles as any script does.
 */
function loadBundle(bundle, cacheFile) {
  const bytes = regularFile(bundle);
  if (!bytes) {
    process.stderr.write(`ank-agent: the agent's bundle '${bundle}' is not a readable file: install the agent again.\n`);
    process.exit(1);
  }
  const source = bytes.toString('utf8');
  const cachedData = cacheFile ? cacheOf(bytes, cacheFile) : undefined;
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: bundle, cachedData });
  if (cachedData)
    debug(
      script.cachedDataRejected
        ? 'V8 rejected the code cache (made by another Node version or under other options): compiled without it.'
        : 'compiled from the code cache.',
    );
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(bundle), module, bundle, dist('.'));
  return module.exports;
}

if (args.length > 0 && args.every((a) => a === '--help' || a === '--version')) {
  if (!existsSync(dist('about.js'))) notBuilt();
  importDist('about.js').then(({ HELP, versionText }) => process.stdout.write(args[0] === '--help' ? HELP : versionText()));
} else if (
  ['ank-agent.cjs', 'ank-agent-run.cjs'].every((f) => existsSync(dist(f))) &&
  !(existsSync(dist('main.js')) && newer(dist('main.js'), dist('ank-agent.cjs')))
) {
  // The start says hello, then loads the run (a bundle of its own, with its cache). A cache of the start would
  // save it nothing: it is small, and its time goes to Node's HTTP/2, which Node compiles with a cache of its own.
  loadBundle(dist('ank-agent.cjs')).main(args, { loadRun: () => loadBundle(dist('ank-agent-run.cjs'), dist('ank-agent-run.cache')) });
} else if (existsSync(dist('main.js'))) {
  importDist('main.js').then(({ main }) => main(args));
} else {
  notBuilt();
}
