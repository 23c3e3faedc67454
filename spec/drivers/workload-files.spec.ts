import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { firstValueFrom, lastValueFrom } from 'rxjs';
import { hostSide } from '../../lib/drivers/host-side.js';
import { controlInterfaceFolder, workloadFolder } from '../../lib/drivers/run-folder.js';
import { WorkloadFiles, filesFolder, mountPointProblem } from '../../lib/drivers/workload-files.js';
import { ConfigurationError } from '../../lib/runtime-connector.js';
import { type WorkloadSpec, instanceKey } from '../../lib/workload.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { PodmanAgent, busybox, podman, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { specFolder } from '../../scripts/harness/temp.js';

describe('workload files', () => {
  it('accepts only absolute mount points without trailing /, empty, . or .. parts', () => {
    expect(mountPointProblem('/etc/app/config.json')).to.equal(undefined);
    expect(mountPointProblem('etc/app')).to.equal('it is not absolute');
    expect(mountPointProblem('/etc/app/')).to.equal('it ends with /');
    expect(mountPointProblem('/etc/../passwd')).to.equal("it has empty, '.' or '..' parts");
    expect(mountPointProblem('/etc/./x')).to.equal("it has empty, '.' or '..' parts");
    expect(mountPointProblem('/etc//x')).to.equal("it has empty, '.' or '..' parts");
  });

  // swdd~workload-files-creator-writes-files-at-mount-point-dependent-path~1
  it('a file that cannot be written, since another file is mounted on its path, fails the create without retries, naming it', async () => {
    const io = specFolder('ank-files-');
    const spec = {
      ...workload('w'),
      files: [
        { mountPoint: '/etc/app', data: 'a file' },
        { mountPoint: '/etc/app/conf', data: 'below a file' },
      ],
    };
    const error = await firstValueFrom(new WorkloadFiles(io).prepare(spec)).catch((err: Error) => err);
    expect(error).to.be.instanceOf(ConfigurationError);
    expect((error as Error).message).to.match(
      /^The file '\/etc\/app\/conf' cannot be written: another file of the workload is mounted on its path \((EEXIST|ENOTDIR)\)\.$/,
    );
  });

  // swdd~location-of-workload-files-at-predefined-path~1, swdd~workload-files-creator-writes-files-at-mount-point-dependent-path~1, swdd~workload-files-creator-decodes-base64-to-binary~2
  it('writes text and base64 binary data under <workload>.<id>/files, mounts them read-only, removes them with the workload', async () => {
    const io = specFolder('ank-files-');
    const files = new WorkloadFiles(io);
    const spec = {
      ...workload('w'),
      files: [
        { mountPoint: '/etc/app.conf', data: 'a = 1\n' },
        { mountPoint: '/opt/blob.bin', binaryData: Buffer.from([0, 1, 254, 255]).toString('base64') },
      ],
    };
    const options = await firstValueFrom(files.prepare(spec));
    const root = filesFolder(io, spec);
    expect(options.fileMounts).to.deep.equal([
      { hostPath: path.join(root, 'etc/app.conf'), mountPoint: '/etc/app.conf' },
      { hostPath: path.join(root, 'opt/blob.bin'), mountPoint: '/opt/blob.bin' },
    ]);
    expect(readFileSync(path.join(root, 'etc/app.conf'), 'utf8')).to.equal('a = 1\n');
    expect([...readFileSync(path.join(root, 'opt/blob.bin'))]).to.deep.equal([0, 1, 254, 255]);
    await lastValueFrom(hostSide(io, files).release(spec), { defaultValue: undefined });
    expect(existsSync(root)).to.equal(false);
  });

  // swdd~agent-delete-old-workload~3, swdd~agent-workload-control-loop-executes-delete~3
  it('a deleted workload takes its whole folder with it, also one an earlier run of the agent made; other workloads keep theirs', async () => {
    const io = specFolder('ank-files-');
    const old = workload('old');
    const other = workload('other');
    for (const spec of [old, other]) {
      mkdirSync(controlInterfaceFolder(io, spec), { recursive: true });
      writeFileSync(path.join(controlInterfaceFolder(io, spec), 'input'), '');
    }
    await lastValueFrom(hostSide(io, new WorkloadFiles(io)).release(old), { defaultValue: undefined });
    expect(existsSync(workloadFolder(io, old.instanceName))).to.equal(false);
    expect(existsSync(path.join(controlInterfaceFolder(io, other), 'input'))).to.equal(true);
  });

  it('an update with changed files writes them anew (old ones go)', async () => {
    const io = specFolder('ank-files-');
    const files = new WorkloadFiles(io);
    const v1 = {
      ...workload('w'),
      files: [
        { mountPoint: '/a', data: 'one' },
        { mountPoint: '/b', data: 'old' },
      ],
    };
    const v2 = { ...workload('w'), files: [{ mountPoint: '/a', data: 'two' }] };
    await firstValueFrom(files.prepare(v1));
    await lastValueFrom(hostSide(io, files).release(v1), { defaultValue: undefined });
    await firstValueFrom(files.prepare(v2));
    expect(readFileSync(path.join(filesFolder(io, v2), 'a'), 'utf8')).to.equal('two');
    expect(existsSync(path.join(filesFolder(io, v2), 'b'))).to.equal(false);
  });

  it('refuses a mount point that escapes, or binary data that is not base64, as a configuration error', async () => {
    const files = new WorkloadFiles(specFolder('ank-files-'));
    const escaping = { ...workload('w'), files: [{ mountPoint: '/../../etc/passwd', data: 'x' }] };
    const notBase64 = { ...workload('w'), files: [{ mountPoint: '/x', binaryData: 'not base64!' }] };
    for (const [spec, message] of [
      [escaping, "The mount point '/../../etc/passwd' of a file cannot be used: it has empty, '.' or '..' parts."],
      [notBase64, "The binaryData of the file '/x' is not base64."],
    ] as const) {
      const error = await firstValueFrom(files.prepare(spec)).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error).to.be.instanceOf(ConfigurationError);
      expect(error!.message).to.equal(message);
    }
  });

  describe('with real Podman', function () {
    this.timeout(60_000);
    before(requirePodman);
    let agent: PodmanAgent;
    let io: string;
    beforeEach(() => {
      io = specFolder('ank-files-');
      agent = new PodmanAgent(uniqueAgent('files'), io);
    });
    afterEach(() => agent.stop());

    describe('a create that fails leaves no files behind, whatever failed', () => {
      const files = [{ mountPoint: '/etc/app.conf', data: 'a = 1' }];
      const cases: Array<[string, () => WorkloadSpec, RegExp]> = [
        [
          'the runtime refuses files (podman-kube)',
          () => ({ ...busybox('refused', agent.agentName, { files }), runtime: 'podman-kube', runtimeConfig: 'manifest: "kind: Pod"' }),
          /^Pending\(StartingFailed\): Workload files are not supported for podman-kube runtime\./,
        ],
        [
          'a file cannot be written (another is mounted on its path)',
          () => busybox('clash', agent.agentName, { files: [...files, { mountPoint: '/etc/app.conf/x', data: 'below a file' }] }),
          /^Pending\(StartingFailed\): The file '\/etc\/app.conf\/x' cannot be written/,
        ],
        [
          'the runtime config cannot be read',
          () => ({ ...busybox('unreadable', agent.agentName, { files }), runtimeConfig: 'image: [' }),
          /^Pending\(StartingFailed\): /,
        ],
        [
          "the runtime's own create fails (it is retried with the files written again)",
          () => {
            const w = busybox('bogus', agent.agentName, { files });
            return { ...w, runtimeConfig: w.runtimeConfig.replace('["--stop-timeout", "1"]', '["--stop-timeout", "1", "--bogus"]') };
          },
          /^Pending\(Starting\): Retry 1: /,
        ],
      ];
      for (const [what, make, reported] of cases) {
        // swdd~agent-workload-control-loop-handles-failed-workload-creation~1, swdd~agent-workload-control-loop-aborts-create-upon-workload-files-creation-error~1
        it(`when ${what}`, async () => {
          const w = make();
          agent.send({ kind: 'serverHello', added: [w] });
          await agent.waitFor(w.instanceName.workloadName, reported);
          expect(existsSync(filesFolder(io, w)), 'the files folder').to.equal(false);
        });
      }
    });

    // swdd~podman-create-mounts-workload-files~1, swdd~agent-workload-control-loop-aborts-create-upon-workload-files-creation-error~1
    it('a container reads its mounted file; a bad mount point is reported Pending(StartingFailed) with the reason', async () => {
      const reader = busybox('reader', agent.agentName, {
        script: 'cat /etc/greeting.txt',
        files: [{ mountPoint: '/etc/greeting.txt', data: 'hello from a file' }],
      });
      const escaper = busybox('escaper', agent.agentName, { files: [{ mountPoint: 'relative/path', data: 'x' }] });
      agent.send({ kind: 'serverHello', added: [reader, escaper] });
      await agent.waitFor('reader', /^Succeeded/);
      expect(podman('logs', instanceKey(reader.instanceName))).to.equal('hello from a file');
      await agent.waitFor('escaper', /^Pending\(StartingFailed\): The mount point 'relative\/path' of a file cannot be used: it is not absolute\.$/);
    });

    // swdd~podman-kube-rejects-workload-files~1
    it('podman-kube workloads with files are refused with a hint to use ConfigMaps', async () => {
      const kube = {
        ...busybox('kubefiles', agent.agentName),
        runtime: 'podman-kube',
        runtimeConfig: 'manifest: "kind: Pod"',
        files: [{ mountPoint: '/x', data: 'y' }],
      };
      agent.send({ kind: 'serverHello', added: [kube] });
      await agent.waitFor('kubefiles', /^Pending\(StartingFailed\): Workload files are not supported for podman-kube runtime\. Use ConfigMaps instead\.$/);
    });
  });
});
