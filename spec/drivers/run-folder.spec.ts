// The run folder under attack: an unprivileged local user tries to make the root agent work on paths
// outside it (links, folders the user owns, races). Real files; the attacker is a real process of uid 65534.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { lastValueFrom } from 'rxjs';
import { ConfigError } from '../../lib/config.js';
import { ControlInterfacePipes } from '../../lib/drivers/control-interface-pipes.js';
import { hostSide } from '../../lib/drivers/host-side.js';
import { SHARED_RUN_FOLDER_MODE, controlInterfaceFolder, prepareRunFolder, workloadFolder } from '../../lib/drivers/run-folder.js';
import { silentLogger } from '../../lib/logger.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { specFolder } from '../../scripts/harness/temp.js';

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;

/** Runs a script as the attacker, to its end. */
const attack = (script: string, ...args: string[]) => spawnSync(process.execPath, ['-e', script, ...args], { uid: NOBODY, gid: NOBODY, encoding: 'utf8' });

/** A folder as /tmp is (root's, 1777), a root-only victim folder with a secret beside it, and what the victim looks like. */
function sandbox() {
  const root = specFolder('ank-attack-');
  chmodSync(root, 0o755);
  const shared = path.join(root, 'tmp');
  mkdirSync(shared);
  chmodSync(shared, 0o1777);
  const victim = path.join(root, 'victim');
  mkdirSync(victim, { mode: 0o755 });
  writeFileSync(path.join(victim, 'secret'), 'root only', { mode: 0o600 });
  const look = () => {
    const stat = lstatSync(victim);
    return { mode: stat.mode & 0o7777, uid: stat.uid, entries: readdirSync(victim), secret: readFileSync(path.join(victim, 'secret'), 'utf8') };
  };
  return { root, shared, victim, before: look(), look };
}

const refusal = (run: () => unknown): string => {
  try {
    run();
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the run folder was accepted');
};

describe('the run folder under attack by another local user', () => {
  before(function () {
    if (!isRoot) this.skip(); // the attacks need a second user, made by root; the agent runs as root
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it('refuses a default run folder that is a link, however the path is spelled (a trailing slash follows links)', () => {
    const box = sandbox();
    attack("require('fs').symlinkSync(process.argv[2], process.argv[1])", path.join(box.shared, 'ankaios'), box.victim);
    expect(refusal(() => prepareRunFolder(`${box.shared}/ankaios/`, 'agent', true))).to.equal(
      `The run folder '${box.shared}/ankaios' is a symbolic link: the agent works only in a real folder.`,
    );
    expect(box.look()).to.deep.equal(box.before);
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it('refuses a shared run folder another user made, with or without the sticky bit, and names what is wrong', () => {
    const box = sandbox();
    const made = attack("require('fs').mkdirSync(process.argv[1]); require('fs').chmodSync(process.argv[1], 0o777)", path.join(box.shared, 'ankaios'));
    expect(made.status, made.stderr).to.equal(0);
    expect(refusal(() => prepareRunFolder(`${box.shared}/ankaios/`, 'agent', true))).to.equal(
      `The run folder '${box.shared}/ankaios' belongs to another user (uid ${NOBODY}): it must be root's or the agent's.`,
    );
    chownSync(path.join(box.shared, 'ankaios'), 0, 0);
    expect(refusal(() => prepareRunFolder(`${box.shared}/ankaios/`, 'agent', true))).to.equal(
      `The run folder '${box.shared}/ankaios' may be written by other users (mode 777) without the sticky bit.`,
    );
    expect(readdirSync(path.join(box.shared, 'ankaios'))).to.deep.equal([]);
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it('in the shared folder it made, the attacker can neither move its io folder away nor put anything in it', () => {
    const box = sandbox();
    const io = prepareRunFolder(`${box.shared}/ankaios/`, 'agent', true);
    expect(lstatSync(path.join(box.shared, 'ankaios')).mode & 0o7777).to.equal(SHARED_RUN_FOLDER_MODE);
    const moved = attack(
      "const fs = require('fs'); const [io, mine] = process.argv.slice(1); fs.mkdirSync(mine); fs.symlinkSync(mine, io + '.x');" +
        "for (const act of [() => fs.renameSync(io, io + '.old'), () => fs.renameSync(io + '.x', io), () => fs.mkdirSync(io + '/w.1')])" +
        '  try { act(); console.log("done"); } catch (e) { console.log(e.code); }',
      io,
      path.join(box.shared, 'mine'),
    );
    expect(moved.stdout.trim().split('\n')).to.deep.equal(['EPERM', 'EPERM', 'EACCES']);
    expect(lstatSync(io).isDirectory()).to.equal(true);
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it('refuses a run folder below a folder another user can change or a link of another user', () => {
    const box = sandbox();
    const theirs = path.join(box.shared, 'theirs');
    attack("require('fs').mkdirSync(process.argv[1], { mode: 0o755 })", theirs);
    mkdirSync(path.join(theirs, 'run'), { recursive: true });
    expect(refusal(() => prepareRunFolder(path.join(theirs, 'run'), 'agent', false))).to.equal(
      `The folder '${theirs}' above the run folder belongs to another user (uid ${NOBODY}): it must be root's or the agent's.`,
    );
    attack("require('fs').symlinkSync(process.argv[2], process.argv[1])", path.join(box.shared, 'link'), box.root);
    expect(refusal(() => prepareRunFolder(path.join(box.shared, 'link', 'victim'), 'agent', false))).to.equal(
      `The link '${path.join(box.shared, 'link')}' above the run folder belongs to another user (uid ${NOBODY}).`,
    );
    expect(box.look()).to.deep.equal(box.before);
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it('a link toggled in place of the default run folder while the agent prepares it never changes a folder outside it', function () {
    this.timeout(120_000);
    const box = sandbox();
    const folder = path.join(box.shared, 'ankaios');
    // The attacker swaps a link to the victim in and out as fast as it can.
    const toggler: ChildProcess = spawn(
      process.execPath,
      [
        '-e',
        "const fs = require('fs'); const [link, target] = process.argv.slice(1); const end = Date.now() + 60000;" +
          'while (Date.now() < end) { try { fs.symlinkSync(target, link); } catch {} try { fs.unlinkSync(link); } catch {} }',
        folder,
        box.victim,
      ],
      { uid: NOBODY, gid: NOBODY, stdio: 'ignore' },
    );
    let prepared = 0;
    try {
      for (let i = 0; i < 3000; i++) {
        try {
          prepareRunFolder(`${folder}/`, 'agent', true);
          prepared++;
        } catch (err) {
          if (!(err instanceof ConfigError)) throw err;
        }
        expect(box.look(), `after attempt ${i + 1}`).to.deep.equal(box.before);
        // Start afresh: a folder the agent made stays the agent's (the attacker cannot remove it), so remove it.
        if (lstatSync(folder, { throwIfNoEntry: false })?.isDirectory()) rmSync(folder, { recursive: true });
      }
    } finally {
      toggler.kill('SIGKILL');
    }
    expect(prepared, 'some attempts found no link and made the folder').to.be.greaterThan(0);
  });

  // swdd~agent-prepares-dedicated-run-folder~2
  it('refuses to hand a bind-mount source with a link in it to the runtime, and makes nothing through it', async () => {
    const box = sandbox();
    const io = prepareRunFolder(`${box.shared}/ankaios/`, 'agent', true);
    const spec = {
      ...workload('w'),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] },
    };
    mkdirSync(workloadFolder(io, spec.instanceName));
    symlinkSync(box.victim, controlInterfaceFolder(io, spec));
    const pipes = new ControlInterfacePipes(io, silentLogger);
    const error = await lastValueFrom(hostSide(io, pipes).prepare(spec)).catch((err: Error) => err);
    expect(String(error)).to.contain(`'${controlInterfaceFolder(io, spec)}' is a symbolic link`);
    expect(box.look()).to.deep.equal(box.before);
    pipes.closeAll();
  });
});
