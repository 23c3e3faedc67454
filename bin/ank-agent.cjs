#!/usr/bin/env node
// Entry point: --help and --version answer from a small module; anything else runs the agent as `npm ci`
// built it (see README): two bundled files, its start (small: it says hello, compiled as it is) and its run (compiled
// from V8's code cache made of it, so that it does not compile what its modules run as they load). Without the bundles,
// or when the compiled modules are newer (a developer ran tsc alone), those modules run instead.
// No Node option: one would make V8 refuse Node's own code cache (bin/main.ts keeps the young generation small
// once the agent is loaded). CommonJS: an ES module as the entry costs Node's start some 8 ms more.
// Node's modules taken as they are, not imported: an import of a built-in module makes an ES module of it, which
// reads every export (node:fs's streams among them) and costs the start some 16 ms of CPU.
const { existsSync, readFileSync, statSync } = process.getBuiltinModule('node:fs');
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
 * The bundle, compiled with its code cache when one is given and was made of exactly this bundle. V8 itself
 * rejects a cache made by another Node version or under other options; the bundle then compiles as any script does.
 */
function loadBundle(bundle, cacheFile) {
  const bytes = readFileSync(bundle);
  const source = bytes.toString('utf8');
  let cachedData;
  if (cacheFile)
    try {
      const cache = readFileSync(cacheFile);
      // zlib is loaded for its CRC-32 only here, once the hello went out.
      if (cache.length > 4 && cache.readUInt32BE(0) === process.getBuiltinModule('node:zlib').crc32(bytes)) cachedData = cache.subarray(4);
      else debug('the code cache was made of another bundle: compiling without it.');
    } catch {
      debug('no code cache: compiling the bundle without it.');
    }
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
