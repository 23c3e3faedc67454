// The boundaries of the layout (README "How it is built"), read from the imports: the core (lib/ outside lib/drivers/, and
// streams/) touches no I/O and no clock of its own; drivers are leaves that never import the pipelines.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';

const ROOT = path.resolve(import.meta.dirname, '..');
const IO_MODULES = /^(node:)?(fs|fs\/promises|net|child_process|os|http|http2|https|dgram|dns|tls|worker_threads|process|readline|cluster|tty)$/;
const IO_PACKAGES = /^(@grpc\/.*|prom-client)$/;
const CLOCKS = /\b(Date\.now|setTimeout|setInterval|setImmediate|Math\.random)\b/;
/** A read of the time other than the run's clock (its scheduler, handed in from bin/). */
const WALL_CLOCK = /\b(Date\.now|performance\.now|asyncScheduler\.now|new Date\(\))/;
const onRunClock = (file: string) => file.startsWith('lib/runtimes/') || file.startsWith('streams/');

interface Source {
  readonly file: string;
  readonly text: string;
}

const importsOf = (text: string) =>
  [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?:[^'";]*?from\s*)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]);
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
/**
 * Where side effects live: lib/drivers/, the runtimes' image pulls and launcher, and in a runtime's folder its connector, its service,
 * CLI, event sources and health check loop; the pure parts beside them (config, state table, health rules) are core.
 */
const RUNTIME_DRIVER = /^lib\/runtimes\/[^/]+\/(index|runtime|kube|cli|podman-cli|libpod|events|health-checks|image-pulls|image-gc|service|lost-creates)\.ts$/;
const isDriver = (file: string) => file.startsWith('lib/drivers/') || RUNTIME_DRIVER.test(file);
const inCore = (file: string) => (file.startsWith('lib/') && !isDriver(file)) || file.startsWith('streams/');
/** The domain: lib/'s own modules, which the folders of lib/ (codecs, the Control Interface, runtimes, drivers) build on. */
const inDomain = (file: string) => /^lib\/[^/]+\.ts$/.test(file);
const ABOVE_DOMAIN = /^lib\/[^/]+\//;

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
    const wall = onRunClock(file) && !clock ? WALL_CLOCK.exec(withoutComments(text)) : null;
    if (wall) problems.push(`${file}: reads the wall clock (${wall[1]})`);
    return problems;
  });
}

/** A call of a runner (run, lines, attempt, conversation, background) with an argument list: an array, or argv made or carried. */
const HANDS_ARGV = /\.(run|lines|attempt|conversation|background)\(\s*(\[|[A-Za-z_.]*(args|present|query|Args|ARGS)\b)/;
/** The files that hand argv to a runner. */
const argvHanders = (sources: readonly Source[]): string[] => sources.filter((s) => HANDS_ARGV.test(withoutComments(s.text))).map((s) => s.file);

function sourcesUnder(folder: string): Source[] {
  return readdirSync(path.join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.posix.join(folder, f.split(path.sep).join('/')))
    .map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));
}

/** The sources' imports of each other (type-only ones too), by file. */
function importGraph(sources: readonly Source[]): Map<string, string[]> {
  const files = new Set(sources.map((s) => s.file));
  return new Map(
    sources.map(({ file, text }) => [
      file,
      importsOf(text)
        .filter((t) => t.startsWith('.'))
        .map((t) => path.posix.join(path.posix.dirname(file), t).replace(/\.js$/, '.ts'))
        .filter((t) => files.has(t)),
    ]),
  );
}

/** Every cycle of imports between files, as `a -> b -> a`. */
const importCycles = (sources: readonly Source[]): string[] => cyclesOf(importGraph(sources));

/** Every cycle of imports between folders (a file of one imports a file of the other, and back), as `a/ -> b/ -> a/`. */
function folderCycles(sources: readonly Source[]): string[] {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of importGraph(sources)) {
    const from = `${path.posix.dirname(file)}/`;
    const edges = folders.get(from) ?? folders.set(from, new Set()).get(from)!;
    for (const target of targets) if (`${path.posix.dirname(target)}/` !== from) edges.add(`${path.posix.dirname(target)}/`);
  }
  return cyclesOf(new Map([...folders].map(([folder, edges]) => [folder, [...edges]])));
}

/**
 * What a runtime's folder imports of lib/runtimes/ that is neither its own, nor the base, nor the parts the container
 * runtimes share (`containers/`, which builds on the base only): each as `file: target`.
 */
function runtimeCrossings(sources: readonly Source[]): string[] {
  return [...importGraph(sources)].flatMap(([file, targets]) => {
    const own = /^lib\/runtimes\/([^/]+)\//.exec(file)?.[1];
    if (own === undefined || own === 'base') return [];
    const shared = own === 'containers' ? ['base'] : ['base', 'containers'];
    return targets
      .filter((t) => t.startsWith('lib/runtimes/') && !t.startsWith(`lib/runtimes/${own}/`) && !shared.some((s) => t.startsWith(`lib/runtimes/${s}/`)))
      .map((t) => `${file}: ${t}`);
  });
}

/** The lines of the base of the runtimes (code and comments) that name an engine or a container CLI's own words. */
const engineWords = (sources: readonly Source[]): string[] =>
  sources
    .filter(({ file }) => file.startsWith('lib/runtimes/base/'))
    .flatMap(({ file, text }) =>
      text.split('\n').flatMap((line, i) => (/podman|nerdctl|containerd|docker|\bexec\b|\b125\b/i.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
    );

function cyclesOf(edges: ReadonlyMap<string, readonly string[]>): string[] {
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
  for (const node of edges.keys()) visit(node, []);
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

  it('no two folders import each other, and a runtime folder imports of the runtimes only the base', () => {
    const sources = [...sourcesUnder('lib'), ...sourcesUnder('streams'), ...sourcesUnder('bin')];
    expect(folderCycles(sources)).to.deep.equal([]);
    expect(runtimeCrossings(sources)).to.deep.equal([]);
    const made = [
      { file: 'lib/runtimes/a/runtime.ts', text: "import { b } from '../b/runtime.js';\nimport { Cli } from '../base/cli.js';" },
      { file: 'lib/runtimes/b/runtime.ts', text: "import { x } from './x.js';" },
      { file: 'lib/runtimes/b/x.ts', text: "import type { A } from '../a/runtime.js';" },
      { file: 'lib/runtimes/base/cli.ts', text: '' },
    ];
    expect(folderCycles(made)).to.deep.equal(['lib/runtimes/a/ -> lib/runtimes/b/ -> lib/runtimes/a/']);
    const shared = [
      { file: 'lib/runtimes/containers/x.ts', text: "import { p } from '../podman/runtime.js';" },
      { file: 'lib/runtimes/podman/runtime.ts', text: "import { x } from '../containers/x.js';" },
    ];
    expect(runtimeCrossings(shared)).to.deep.equal(['lib/runtimes/containers/x.ts: lib/runtimes/podman/runtime.ts']);
    expect(runtimeCrossings(made)).to.deep.equal(['lib/runtimes/a/runtime.ts: lib/runtimes/b/runtime.ts', 'lib/runtimes/b/x.ts: lib/runtimes/a/runtime.ts']);
  });

  it('the base of the runtimes names no engine: what one runtime needs lives in its folder', () => {
    expect(engineWords(sourcesUnder('lib'))).to.deep.equal([]);
    expect(engineWords([{ file: 'lib/runtimes/base/cli.ts', text: 'ok\n// Podman exits 125' }])).to.deep.equal([
      'lib/runtimes/base/cli.ts:2: // Podman exits 125',
    ]);
  });

  it("the core imports no I/O and reads no clock; lib/runtimes/ and streams/ read only the run's; drivers import nothing from streams/; the domain nothing of the folders that build on it", () => {
    const sources = [...sourcesUnder('lib'), ...sourcesUnder('streams')];
    expect(sources.length).to.be.greaterThan(30);
    expect(boundaryViolations(sources)).to.deep.equal([]);
  });

  it('argv is handed to a runner in one file per engine folder (its client), in none of containers/ or base/', () => {
    const handing = argvHanders(sourcesUnder('lib/runtimes'));
    expect(handing.filter((file) => /^lib\/runtimes\/(containers|base)\//.test(file))).to.deep.equal([]);
    const folders = handing.map((file) => path.posix.dirname(file));
    expect(
      folders.filter((folder, i) => folders.indexOf(folder) !== i),
      'a folder with two such files',
    ).to.deep.equal([]);
    expect(handing).to.include.members(['lib/runtimes/podman/podman-cli.ts', 'lib/runtimes/containerd/runtime.ts', 'lib/runtimes/systemd/runtime.ts']);
    expect(argvHanders([{ file: 'lib/runtimes/podman/kube.ts', text: "this.cli.run(['pod', 'stop', ...pods]);\nthis.slots.run(work$);" }])).to.deep.equal([
      'lib/runtimes/podman/kube.ts',
    ]);
  });

  it('only lib/drivers/ starts processes: no other module of lib/, streams/ or bin/ imports child_process', () => {
    const spawners = [...sourcesUnder('lib'), ...sourcesUnder('streams'), ...sourcesUnder('bin')]
      .filter((s) => importsOf(withoutComments(s.text)).some((m) => /^(node:)?child_process$/.test(m)))
      .map((s) => s.file);
    expect(spawners.filter((file) => !file.startsWith('lib/drivers/'))).to.deep.equal([]);
    expect(spawners).to.include('lib/drivers/processes.ts');
  });

  it('would catch a driver that imports a pipeline, a core module that does I/O or keeps time, a runtime reading the wall clock, and the domain importing what builds on it', () => {
    expect(
      boundaryViolations([
        { file: 'lib/drivers/x.ts', text: "import { agent } from '../../streams/agent.js';\nimport '../../streams/trace.js';" },
        {
          file: 'streams/y.ts',
          text: "import { readFileSync } from 'node:fs';\nimport { Registry } from 'prom-client';\nconst t = Date.now(); // Math.random in a comment is fine",
        },
        { file: 'lib/z.ts', text: "const grpc = await import('@grpc/grpc-js');\nsetTimeout(() => 0, 1);" },
        { file: 'lib/w.ts', text: "import { healthOf } from './runtimes/podman/health.js';\nimport type { DesiredState } from './codec/manifest.js';" },
        { file: 'lib/runtimes/podman/service.ts', text: 'const since = performance.now();' },
        { file: 'streams/v.ts', text: 'const at = asyncScheduler.now();' },
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
      'lib/w.ts: the domain imports lib/codec/manifest.js, which builds on it',
      'lib/runtimes/podman/service.ts: reads the wall clock (performance.now)',
      'streams/v.ts: reads the wall clock (asyncScheduler.now)',
    ]);
  });
});
