// npm run build, after tsc: the agent as two files (dist/bin/ank-agent.cjs, its start; dist/bin/ank-agent-run.cjs, its run) and prom-client as another
// (dist/bin/prom-client.cjs, loaded only when the metrics endpoint is on). Together with bin/ank-agent.cjs
// and dist/bin/about.js they are all the installed package needs: no node_modules at run time.
import { build } from 'esbuild';

// rxjs by its ES build: Node's condition would pick its CommonJS build, which esbuild wraps as a namespace object for
// every module that imports it (some 330 getters each, at every load) and cannot shake.
const esRxjs = { rxjs: './node_modules/rxjs/dist/esm/index.js' };
const common = { bundle: true, platform: 'node', format: 'cjs', target: 'node20', minifyWhitespace: true, minifySyntax: true, logLevel: 'warning' };

// The start (bin/main.ts: the command line, and the hello to the server) is a file of its own, loaded first; the
// run (bin/run.ts: everything else) is another, loaded once the hello went out. A module both use is in both:
// what they share at run time goes through the process (the call opened early: lib/drivers/grpc-call.ts).
await build({
  ...common,
  entryPoints: ['dist/bin/main.js'],
  outfile: 'dist/bin/ank-agent.cjs',
  alias: esRxjs,
  // The run is loaded by bin/ank-agent.cjs (with its code cache); the import() of main.ts is the unbundled path.
  external: ['./run.js'],
  supported: { 'dynamic-import': false },
  define: { 'import.meta.url': '__bundleUrl' },
  banner: { js: "const __bundleUrl = require('node:url').pathToFileURL(__filename).href;" },
});
await build({
  ...common,
  entryPoints: ['dist/bin/run.js'],
  outfile: 'dist/bin/ank-agent-run.cjs',
  // prom-client is the metrics endpoint's alone: a file of its own beside the bundle, required only when it is on.
  alias: { ...esRxjs, 'prom-client': './prom-client.cjs' },
  external: ['./prom-client.cjs'],
  // import() of a bundled module stays in the bundle (a require when it runs), so nothing is looked up at run time.
  supported: { 'dynamic-import': false },
  // module.require() is how lib/codec/descriptors.cts loads protobuf-es's descriptors on first use (a module
  // loaded through Node's ES module loader is given a require() that cannot load an ES module); as require(),
  // esbuild bundles what it loads and runs it only then.
  define: { 'import.meta.url': '__bundleUrl', 'module.require': 'require' },
  banner: { js: "const __bundleUrl = require('node:url').pathToFileURL(__filename).href;" },
});
await build({ ...common, entryPoints: ['node_modules/prom-client/index.js'], outfile: 'dist/bin/prom-client.cjs' });
