// npm run trace: which spec checks which requirement of the agent.
//   npm run trace                         report; exits 1 when a requirement that needs a test has none
//   npm run trace -- --quiet              only what is missing, and the summary
//   npm run trace -- --extract <seeds>    refresh spec/requirements.json from the seed documents
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

interface Requirement {
  readonly id: string;
  readonly title: string;
  readonly seed: string;
  readonly needs: string[];
  /** Why the agent does not have to meet it, when it does not. */
  readonly notForAgent?: string;
}

const REQUIREMENTS = path.resolve('spec/requirements.json');

/** Seed 001 describes the API library shared with the server; these parts are the server's or the library's own. */
const NOT_FOR_AGENT: Record<string, string> = {
  'swdd~api-state-map-for-workload-execution-states~1': "the server's map of all agents' states (the agent keeps its own WorkloadStateStore)",
  'swdd~api-provides-spec-object-definitions~1': 'Rust macro-generated objects of the reference library',
  'swdd~api-conversions-between-ank-base-and-spec~1': 'Rust macro-generated conversions of the reference library',
};

/** Requirements an issue replaced with the reference agent's behaviour, which a server or a workload can tell apart. */
const SUPERSEDED: Record<string, string> = {
  'swdd~agent-delete-old-workload-without-sending-workload-states~1': 'issue 13: a restart is reported as an update (Stopping, Removed, Pending(Starting))',
  'swdd~podman-kube-state-getter-removed-if-no-container~1': 'issue 13: a kube workload whose pods are gone is Failed(Unknown), never Removed',
};

function extract(seedsDir: string): Requirement[] {
  const files = readdirSync(seedsDir).filter((f) => /^00[01]_.*\.txt$/.test(f)).sort();
  return files.flatMap((file) => {
    const lines = readFileSync(path.join(seedsDir, file), 'utf8').split('\n');
    const found: Requirement[] = [];
    lines.forEach((line, i) => {
      const m = /^`(swdd~[^`]+)`$/.exec(line.trim());
      if (!m) return;
      const title = (lines[i - 1] ?? '').replace(/^#+\s*/, '').trim();
      const needs: string[] = [];
      for (let j = i + 1; j < lines.length && !lines[j].startsWith('#'); j++) {
        if (lines[j].trim() !== 'Needs:') continue;
        for (let k = j + 1; k < lines.length && lines[k].trim().startsWith('- '); k++) needs.push(lines[k].trim().slice(2));
        break;
      }
      const seed = file.slice(0, 3);
      found.push({ id: m[1], title, seed, needs, ...(NOT_FOR_AGENT[m[1]] ? { notForAgent: NOT_FOR_AGENT[m[1]] } : {}) });
    });
    return found;
  });
}

function specFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? specFiles(path.join(dir, e.name)) : e.name.endsWith('.spec.ts') ? [path.join(dir, e.name)] : []);
}

/** `file:line` of every spec line that names the requirement (ids end at a character that cannot be part of them). */
function mentions(id: string, specs: Array<[string, string[]]>): string[] {
  const pattern = new RegExp(`${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w~-])`);
  return specs.flatMap(([file, lines]) => lines.flatMap((line, i) => (pattern.test(line) ? [`${path.relative('.', file)}:${i + 1}`] : [])));
}

const args = process.argv.slice(2);
if (args[0] === '--extract') {
  const requirements = extract(args[1] ?? '../shared/seeds');
  writeFileSync(REQUIREMENTS, `${JSON.stringify(requirements, null, 2)}\n`);
  console.log(`${requirements.length} requirements written to ${path.relative('.', REQUIREMENTS)}`);
  process.exit(0);
}

const requirements = JSON.parse(readFileSync(REQUIREMENTS, 'utf8')) as Requirement[];
const specs = specFiles('spec').map((f) => [f, readFileSync(f, 'utf8').split('\n')] as [string, string[]]);
const quiet = args.includes('--quiet');
let untested = 0;
for (const r of requirements) {
  const where = mentions(r.id, specs);
  const needsTest = r.needs.some((n) => /test/.test(n));
  const superseded = SUPERSEDED[r.id];
  const status = r.notForAgent ? 'n/a ' : superseded ? 'replaced' : where.length > 0 ? 'ok  ' : needsTest ? 'MISSING' : 'impl';
  if (status === 'MISSING') untested += 1;
  if (quiet && status !== 'MISSING') continue;
  console.log(`${status.padEnd(7)} ${r.id}${r.notForAgent ? `  (${r.notForAgent})` : superseded ? `  (${superseded})` : ''}`);
  for (const w of where.slice(0, 3)) console.log(`          ${w}`);
  if (where.length > 3) console.log(`          … and ${where.length - 3} more`);
}
const agentRequirements = requirements.filter((r) => !r.notForAgent && !SUPERSEDED[r.id]);
console.log(`${quiet ? '' : '\n'}${agentRequirements.length} agent requirements; ${agentRequirements.filter((r) => mentions(r.id, specs).length > 0).length} named by a spec; ${untested} that need a test have none; ${Object.keys(SUPERSEDED).length} replaced by issues.`);
process.exit(untested > 0 ? 1 : 0);
