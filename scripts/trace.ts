// npm run trace: which spec checks which requirement of the agent.
//   npm run trace                         report; exits 1 when a requirement that needs a test has none
//   npm run trace -- --quiet              only what is missing, and the summary
//   npm run trace -- --extract <folder of the older designs> <folder of the released design>
//                                         refresh spec/requirements.json from the design documents
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

interface Requirement {
  readonly id: string;
  readonly title: string;
  readonly design: string;
  readonly needs: string[];
  /** Why the agent does not have to meet it, when it does not. */
  readonly notForAgent?: string;
  /** The requirement of the released design that replaced it. */
  readonly supersededBy?: string;
}

const REQUIREMENTS = path.resolve('spec/requirements.json');

/** Where the requirements come from: the older designs, and the released agent's design, which decides where they differ. */
const SOURCES = [
  { label: '000', file: /^000_.*\.txt$/ },
  { label: '001', file: /^001_.*\.txt$/ },
  { label: 'v1.0.1', file: /^agent-swdd\.md$/ },
] as const;

/** Parts of the designs that are not the agent's to meet, and why. */
const NOT_FOR_AGENT: Record<string, string> = {
  'swdd~api-state-map-for-workload-execution-states~1': "the server's map of all agents' states (the agent keeps its own WorkloadStateStore)",
  'swdd~api-provides-spec-object-definitions~1': 'Rust macro-generated objects of the reference library',
  'swdd~api-conversions-between-ank-base-and-spec~1': 'Rust macro-generated conversions of the reference library',
};
/**
 * Requirements of the released design that its own agent does not meet; the agent does what the released
 * agent does, because that is what a server, ank and the SDKs show and expect.
 */
const AS_RELEASED: Record<string, string> = {
  'swdd~podman-kube-state-getter-removed-if-no-container~1':
    'a kube workload without any pod is Failed(Lost), as the released agent reports it: Removed would make the server forget a workload that is still wanted',
};

/** Seed requirements the released design dropped or changed without a newer version of the same id. */
const SUPERSEDED: Record<string, string> = {
  'swdd~agent-delete-old-workload-without-sending-workload-states~1':
    'swdd~workload-control-loop-restarts-workloads-using-update~1: a restart is reported as an update',
  'swdd~agent-workload-control-loop-limits-retry-attempts~1': 'swdd~agent-workload-control-loop-exponential-backoff-retries~1: retries without limit',
  'swdd~agent-workload-control-loop-retry-limit-set-execution-state~2':
    'swdd~agent-workload-control-loop-handles-failed-workload-creation~1: Pending(Starting) "Retry <n>: <cause>"',
  'swdd~agent-workload-control-loop-reset-retry-attempts-on-update~1': 'swdd~agent-workload-control-loop-reset-backoff-on-update~1',
  'swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1': 'swdd~agent-workload-control-loop-exponential-backoff-retries~1',
  'swdd~agent-ensures-control-interface-output-pipe-read~1': 'swdd~agent-ensures-control-interface-input-pipe-read~1',
  'swdd~agent-handles-control-interface-input-pipe-not-read~1': 'swdd~agent-handles-control-interface-full-output-pipe-buffer~1',
  'swdd~agent-supports-restart-policies~1': 'swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2',
  'swdd~functions-required-by-runtime-connector~1': 'swdd~agent-functions-required-by-runtime-connector~1',
};

/** This agent's own requirements, beyond the Ankaios designs (README "Beyond the released agent"). */
const OWN: Requirement[] = [
  [
    'rx~health-runs-checks-on-interval~1',
    "A podman workload's health check (Podman's flags in its commandOptions) is run by the agent once per interval, one at a time, with a deadline",
  ],
  ['rx~health-starting-until-healthy~1', 'While its container runs and no check has passed, the workload is Pending(Starting), waiting for its health check'],
  ['rx~health-running-when-healthy~1', 'A healthy workload is Running(Ok): its ADD_COND_RUNNING dependents start only then'],
  [
    'rx~health-unhealthy-fails-and-stops~1',
    'An unhealthy workload is Failed(ExecFailed) with the check output, its container is stopped, and its restart policy decides',
  ],
  [
    'rx~health-kube-liveness-probes~1',
    "A podman-kube workload's containers that Podman gave a health check (of their livenessProbe) are checked like a podman workload's; the workload is healthy once all are, unhealthy once one is",
  ],
  [
    'rx~health-switch-off~1',
    'health_checks = false in the agent config gives the released behaviour: the checks are left to Podman, the states come from the container',
  ],
  ['rx~crash-loop-backoff~1', 'A restart after a short run that follows another waits, from a first delay doubling to a cap; a long run resets it'],
  ['rx~crash-loop-backoff-state~1', 'While it waits, the workload is Pending(WaitingToStart) saying which restart comes, when, and how the last run ended'],
  ['rx~crash-loop-backoff-ends-on-command~1', 'An update or a delete ends the wait at once'],
  ['rx~crash-loop-backoff-config~1', "The agent config's crash_loop_backoff changes it; a first delay of 0 restarts at once, always (the released agent)"],
  [
    'rx~pull-ahead~1',
    "An update's new image (podman, podman-kube, containerd) is pulled while the old instance runs and is watched; a pull that fails is retried with the create back-off, reported on the new instance, and never stops the old one; pull_ahead = false gives the released order",
  ],
  [
    'rx~containerd-scope~1',
    "A containerd workload's generalOptions (namespace, address), after the agent config's `containerd`, go with every nerdctl call for it; its state is watched, and it is found again, in its namespace",
  ],
  ['rx~containerd-health-flags~1', 'A containerd workload that gives health flags (nerdctl has none) is Pending(StartingFailed) naming the flag, not retried'],
  ['rx~pull-ahead-waiting~1', 'A workload waiting on its dependencies has its image pulled meanwhile; its create waits for a pull still under way'],
  [
    'rx~pull-ahead-registry~1',
    "Pulls use the workload's registry options (--tls-verify, --authfile, --creds, --cert-dir, --platform, …; nerdctl's and kube play's own) and its --pull policy or imagePullPolicy",
  ],
  [
    'rx~podman-service~1',
    "Podman is asked through its running service (the system's, else the agent's own): creates by the remote client with the workload's options as given, lists and image checks by REST; what the remote client lacks goes to the local CLI",
  ],
  [
    'rx~podman-service-fallback~1',
    'A service that is killed, stalls or is not Podman is replaced, its calls made by the local CLI meanwhile, nothing lost or made twice; podman_service = false keeps a Podman process per call',
  ],
  [
    'rx~lost-container-sweep~1',
    "What a Podman call cut short leaves running outside Podman's list is removed by the OCI runtime Podman is configured with, found only as a conmon of the agent's own user and storage (never by a process's argv alone); a remove made again after the service was lost reports Removed only once no process of the container is left",
  ],
  [
    'rx~image-gc~1',
    "The images the agent pulled itself (recorded in its folder, across restarts) are removed once no container uses them and they are older than image_gc.min_age; a user's image and one any container uses are never removed",
  ],
  [
    'rx~image-gc-disk-guard~1',
    "A pull ahead waits while the image store's filesystem is above image_gc.high after a collection, reported as a failed pull with the filesystem and how full it is, and goes on once there is room",
  ],
  [
    'rx~max-concurrent-creates~1',
    'ANKAIOS_PODMAN_MAX_CONCURRENT_CREATES and ANKAIOS_CONTAINERD_MAX_CONCURRENT_CREATES cap the creates an engine runs at once (4 unless said)',
  ],
  [
    'rx~systemd-runtime~1',
    'runtime systemd manages an installed unit: serviceName and desiredState (running, stopped, restarted) applied by systemctl, a delete stops the unit, its logs are the journal (journalctl -u)',
  ],
  [
    'rx~systemd-config~1',
    'A systemd runtime config with a service name of other characters or without a unit type, another desiredState, or general options other than --user, --system, --host, --machine is refused, naming the field',
  ],
  [
    'rx~systemd-states~1',
    "A systemd workload's state is its unit's: active Running(Ok), inactive Succeeded(Ok) or Failed(ExecFailed) with the exit code, failed Failed(ExecFailed) with the sub-state, activating Pending(Starting), deactivating Stopping",
  ],
  [
    'rx~systemd-events~1',
    "Unit states come from systemd's own PropertiesChanged on its private bus (one bridge for all units); systemctl show verifies them every 30 s and polls every 500 ms while the bridge is down",
  ],
  [
    'rx~systemd-refusals~1',
    'A Control Interface, workload files or a unit that does not exist make a systemd workload Pending(StartingFailed), without retries',
  ],
  ['rx~systemd-restart-rule~1', 'desiredState restarted leaves a unit that became active in the last 3 s as it is'],
  ['rx~systemd-resume~1', 'An agent started again finds the units it managed (kept in its io folder) and resumes them, neither starting nor restarting them'],
].map(([id, title]) => ({ id, title, design: 'ank-agent-rx', needs: ['utest'] }));

const baseOf = (id: string) => id.replace(/~\d+$/, '');
const versionOf = (id: string) => Number(/~(\d+)$/.exec(id)?.[1] ?? 0);

function extractFile(file: string, label: string): Requirement[] {
  const lines = readFileSync(file, 'utf8').split('\n');
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
    const notForAgent = NOT_FOR_AGENT[m[1]] ?? AS_RELEASED[m[1]];
    found.push({ id: m[1], title, design: label, needs, ...(notForAgent ? { notForAgent } : {}) });
  });
  return found;
}

/**
 * Every requirement of the older designs and of the released design; an older requirement that the released
 * design has in a newer version (or the same) is kept once, as superseded by the released one.
 */
function extract(olderDir: string, releasedDir: string): Requirement[] {
  const all = SOURCES.flatMap(({ label, file }) => {
    const dir = label === 'v1.0.1' ? releasedDir : olderDir;
    return readdirSync(dir)
      .filter((f) => file.test(f))
      .sort()
      .flatMap((f) => extractFile(path.join(dir, f), label));
  });
  const released = new Map(all.filter((r) => r.design === 'v1.0.1').map((r) => [baseOf(r.id), r]));
  return all.flatMap((r): Requirement[] => {
    const newer = released.get(baseOf(r.id));
    if (r.design !== 'v1.0.1' && newer && newer.id === r.id) return [];
    if (r.design === '000' && newer && versionOf(newer.id) > versionOf(r.id)) return [{ ...r, supersededBy: newer.id }];
    if (r.design === '000' && !newer && SUPERSEDED[r.id]) return [{ ...r, supersededBy: SUPERSEDED[r.id] }];
    if (r.design === '000' && !newer) throw new Error(`${r.id} of the older agent design is not in the released design: say in SUPERSEDED what replaced it`);
    return [r];
  });
}

function specFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? specFiles(path.join(dir, e.name)) : e.name.endsWith('.spec.ts') ? [path.join(dir, e.name)] : [],
  );
}

/** `file:line` of every spec line that names the requirement (ids end at a character that cannot be part of them). */
function mentions(id: string, specs: Array<[string, string[]]>): string[] {
  const pattern = new RegExp(`${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w~-])`);
  return specs.flatMap(([file, lines]) => lines.flatMap((line, i) => (pattern.test(line) ? [`${path.relative('.', file)}:${i + 1}`] : [])));
}

const args = process.argv.slice(2);
if (args[0] === '--extract') {
  if (!args[1] || !args[2]) {
    console.error('usage: npm run trace -- --extract <folder of the older designs> <folder of the released v1.0.1 design>');
    process.exit(2);
  }
  const requirements = extract(args[1], args[2]);
  writeFileSync(REQUIREMENTS, `${JSON.stringify(requirements, null, 2)}\n`);
  console.log(`${requirements.length} requirements written to ${path.relative('.', REQUIREMENTS)}`);
  process.exit(0);
}

const requirements = [...(JSON.parse(readFileSync(REQUIREMENTS, 'utf8')) as Requirement[]), ...OWN];
const specs = specFiles('spec').map((f) => [f, readFileSync(f, 'utf8').split('\n')] as [string, string[]]);
const quiet = args.includes('--quiet');
let untested = 0;
for (const r of requirements) {
  const where = mentions(r.id, specs);
  const needsTest = r.needs.some((n) => /test/.test(n));
  const superseded = r.supersededBy;
  const status = r.notForAgent ? 'n/a ' : superseded ? 'replaced' : where.length > 0 ? 'ok  ' : needsTest ? 'MISSING' : 'impl';
  if (status === 'MISSING') untested += 1;
  if (quiet && status !== 'MISSING') continue;
  console.log(`${status.padEnd(7)} ${r.id}${r.notForAgent ? `  (${r.notForAgent})` : superseded ? `  (by ${superseded})` : ''}`);
  for (const w of where.slice(0, 3)) console.log(`          ${w}`);
  if (where.length > 3) console.log(`          … and ${where.length - 3} more`);
}
const agentRequirements = requirements.filter((r) => !r.notForAgent && !r.supersededBy);
const released = agentRequirements.filter((r) => r.design === 'v1.0.1');
console.log(
  `${quiet ? '' : '\n'}${agentRequirements.length} agent requirements (${released.length} of the released agent design v1.0.1, ${OWN.length} of this agent's own); ${agentRequirements.filter((r) => mentions(r.id, specs).length > 0).length} named by a spec; ${untested} that need a test have none; ${requirements.filter((r) => r.supersededBy).length} requirements of the older designs superseded; ${requirements.filter((r) => r.notForAgent).length} not for this agent.`,
);
process.exit(untested > 0 ? 1 : 0);
