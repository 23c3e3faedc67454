// The boundaries of the layout (README "How it is built"), read from the imports: the core (lib/ outside lib/drivers/, and
// streams/) touches no I/O and no clock of its own; drivers are leaves that never import the pipelines.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';

const ROOT = path.resolve(import.meta.dirname, '..');
const IO_MODULES = /^(node:)?(fs|fs\/promises|net|child_process|os|http|http2|https|dgram|dns|tls|worker_threads|process|readline|cluster|tty)$/;
const IO_PACKAGES = /^(winston|@grpc\/.*|prom-client)$/;
const CLOCKS = /\b(Date\.now|setTimeout|setInterval|setImmediate|Math\.random)\b/;

interface Source {
  readonly file: string;
  readonly text: string;
}

const importsOf = (text: string) =>
  [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?:[^'";]*?from\s*)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]);
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
/**
 * Where side effects live: lib/drivers/, the runtimes' image pulls and launcher, and in a runtime's folder its connector,
 * CLI, event sources and health check loop; the pure parts beside them (config, state table, health rules) are core.
 */
const RUNTIME_DRIVER = /^lib\/runtimes\/([^/]+\/)?(runtime|cli|events|health-checks|image-pulls|launcher)\.ts$/;
const isDriver = (file: string) => file.startsWith('lib/drivers/') || RUNTIME_DRIVER.test(file);
const inCore = (file: string) => (file.startsWith('lib/') && !isDriver(file)) || file.startsWith('streams/');
/** The domain: lib/'s own modules, which no runtime's folder, driver or manifest reader sits under. */
const inDomain = (file: string) => /^lib\/[^/]+\.ts$/.test(file) && file !== 'lib/manifest.ts';
const ABOVE_DOMAIN = /^lib\/(drivers|runtimes)\/|^lib\/manifest\.js$/;

/** Every boundary a source breaks, as `file: what`. */
function boundaryViolations(sources: readonly Source[]): string[] {
  return sources.flatMap(({ file, text }) => {
    const problems: string[] = [];
    for (const target of importsOf(text)) {
      const resolved = target.startsWith('.') ? path.posix.join(path.posix.dirname(file), target) : target;
      if (inCore(file) && (IO_MODULES.test(target) || IO_PACKAGES.test(target))) problems.push(`${file}: imports ${target}`);
      if (isDriver(file) && resolved.startsWith('streams/')) problems.push(`${file}: a driver imports the pipeline ${resolved}`);
      if (inDomain(file) && ABOVE_DOMAIN.test(resolved)) problems.push(`${file}: the domain imports ${resolved}, which builds on it`);
    }
    const clock = inCore(file) ? CLOCKS.exec(withoutComments(text)) : null;
    if (clock) problems.push(`${file}: uses ${clock[1]}`);
    return problems;
  });
}

function sourcesUnder(folder: string): Source[] {
  return readdirSync(path.join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.posix.join(folder, f.split(path.sep).join('/')))
    .map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));
}

/** Every cycle of imports (type-only ones too), as `a -> b -> a`. */
function importCycles(sources: readonly Source[]): string[] {
  const files = new Set(sources.map((s) => s.file));
  const edges = new Map(
    sources.map(({ file, text }) => [
      file,
      importsOf(text)
        .filter((t) => t.startsWith('.'))
        .map((t) => path.posix.join(path.posix.dirname(file), t).replace(/\.js$/, '.ts'))
        .filter((t) => files.has(t)),
    ]),
  );
  const cycles = new Set<string>();
  const done = new Set<string>();
  const visit = (file: string, trail: string[]) => {
    const at = trail.indexOf(file);
    if (at >= 0) {
      cycles.add([...trail.slice(at), file].join(' -> '));
      return;
    }
    if (done.has(file)) return;
    for (const next of edges.get(file) ?? []) visit(next, [...trail, file]);
    done.add(file);
  };
  for (const file of files) visit(file, []);
  return [...cycles];
}

describe('the boundaries of the code', () => {
  it('no two modules import each other, not even for types', () => {
    expect(importCycles([...sourcesUnder('lib'), ...sourcesUnder('streams'), ...sourcesUnder('bin')])).to.deep.equal([]);
    expect(
      importCycles([
        { file: 'lib/a.ts', text: "import type { B } from './b.js';" },
        { file: 'lib/b.ts', text: "import { a } from './a.js';" },
      ]),
    ).to.deep.equal(['lib/a.ts -> lib/b.ts -> lib/a.ts']);
  });

  it("the core imports no I/O and reads no clock; drivers import nothing from streams/; the domain nothing of a runtime's, a driver's or the manifest reader's", () => {
    const sources = [...sourcesUnder('lib'), ...sourcesUnder('streams')];
    expect(sources.length).to.be.greaterThan(30);
    expect(boundaryViolations(sources)).to.deep.equal([]);
  });

  it('would catch a driver that imports a pipeline, a core module that does I/O or keeps time, and the domain importing what builds on it', () => {
    expect(
      boundaryViolations([
        { file: 'lib/drivers/x.ts', text: "import { agent } from '../../streams/agent.js';\nimport '../../streams/trace.js';" },
        {
          file: 'streams/y.ts',
          text: "import { readFileSync } from 'node:fs';\nimport { Registry } from 'prom-client';\nconst t = Date.now(); // Math.random in a comment is fine",
        },
        { file: 'lib/z.ts', text: "const grpc = await import('@grpc/grpc-js');\nsetTimeout(() => 0, 1);" },
        { file: 'lib/w.ts', text: "import { healthOf } from './runtimes/podman/health.js';\nimport type { DesiredState } from './manifest.js';" },
      ]),
    ).to.deep.equal([
      'lib/drivers/x.ts: a driver imports the pipeline streams/agent.js',
      'lib/drivers/x.ts: a driver imports the pipeline streams/trace.js',
      'streams/y.ts: imports node:fs',
      'streams/y.ts: imports prom-client',
      'streams/y.ts: uses Date.now',
      'lib/z.ts: imports @grpc/grpc-js',
      'lib/z.ts: uses setTimeout',
      'lib/w.ts: the domain imports lib/runtimes/podman/health.js, which builds on it',
      'lib/w.ts: the domain imports lib/manifest.js, which builds on it',
    ]);
  });
});
