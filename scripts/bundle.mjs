// npm run build, after tsc: the agent as one file (dist/bin/ank-agent.cjs) and prom-client as another
// (dist/bin/prom-client.cjs, loaded only when the metrics endpoint is on). Together with bin/ank-agent.js
// and dist/bin/about.js they are all the installed package needs: no node_modules at run time.
import { build } from 'esbuild';

const common = { bundle: true, platform: 'node', format: 'cjs', target: 'node20', minifyWhitespace: true, minifySyntax: true, logLevel: 'warning' };

await build({
  ...common,
  entryPoints: ['dist/bin/main.js'],
  outfile: 'dist/bin/ank-agent.cjs',
  // prom-client is the metrics endpoint's alone: a file of its own beside the bundle, required only when it is on.
  alias: { 'prom-client': './prom-client.cjs' },
  external: ['./prom-client.cjs'],
  // import() of a bundled module stays in the bundle (a require when it runs), so nothing is looked up at run time.
  supported: { 'dynamic-import': false },
  define: { 'import.meta.url': '__bundleUrl' },
  banner: { js: "const __bundleUrl = require('node:url').pathToFileURL(__filename).href;" },
});
await build({ ...common, entryPoints: ['node_modules/prom-client/index.js'], outfile: 'dist/bin/prom-client.cjs' });
