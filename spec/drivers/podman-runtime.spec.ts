// The podman and podman-kube runtimes on real Podman, driven by the workload core.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { NEVER, firstValueFrom, lastValueFrom } from 'rxjs';
import { ExecutionState } from '../../lib/execution-state.js';
import { type KubeId, PodmanKubeRuntime, podsPlayed } from '../../lib/runtimes/podman/kube.js';
import { PodmanCli } from '../../lib/runtimes/podman/podman-cli.js';
import type { RuntimeConnector } from '../../lib/runtime-connector.js';
import { builtInRuntimes } from '../../bin/wiring.js';
import { silentLogger } from '../../lib/logger.js';
import { containerRunArgs, parseContainerConfig } from '../../lib/runtimes/containers/run-config.js';
import { instanceKey } from '../../lib/workload.js';
import { parseKubeConfig } from '../../lib/runtimes/podman/kube-config.js';
import { IMAGE, PodmanAgent, busybox, containerOf, kubePod, podman, requirePodman, spec, specService, uniqueAgent } from '../../scripts/harness/podman.js';
import { harnessCli, harnessProcesses } from '../../scripts/harness/processes.js';
import { specFolder } from '../../scripts/harness/temp.js';

describe('Podman runtimes (real Podman)', function () {
  this.timeout(60_000);
  before(requirePodman);
  let agent: PodmanAgent;
  beforeEach(() => (agent = new PodmanAgent(uniqueAgent())));
  afterEach(() => agent.stop());

  describe('podman', () => {
    // swdd~agent-supports-podman~2, swdd~podman-uses-podman-cli~1, swdd~podman-create-workload-runs-workload~2, swdd~podman-state-getter-maps-state~3
    it('Pending(Starting) → Running(Ok) → Failed with the exit code, or Succeeded', async () => {
      const failing = busybox('failing', agent.agentName, { script: 'sleep 1; exit 3' });
      const fine = busybox('fine', agent.agentName, { script: 'sleep 1; exit 0' });
      agent.send({ kind: 'serverHello', added: [failing, fine] });
      await agent.waitFor('failing', /^Failed\(ExecFailed\): Exit code: '3'$/);
      await agent.waitFor('fine', /^Succeeded\(Ok\)$/);
      expect(agent.history('failing')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)', "Failed(ExecFailed): Exit code: '3'"]);
      expect(agent.history('fine')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)', 'Succeeded(Ok)']);
    });

    // swdd~podman-create-workload-creates-labels~2, swdd~podman-create-workload-sets-optionally-container-name~2
    it('the container is named after the instance and labelled with name and agent', async () => {
      const w = busybox('labelled', agent.agentName);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('labelled', /^Running/);
      const key = instanceKey(w.instanceName);
      expect(podman('inspect', key, '--format={{index .Config.Labels "name"}} {{index .Config.Labels "agent"}}')).to.equal(`${key} ${agent.agentName}`);
    });

    // swdd~podman-create-workload-sets-optionally-container-name~2
    it('a --name in commandOptions wins: the container has that name, and is still found and deleted by its name label', async () => {
      const config = parseContainerConfig(`image: x\ncommandOptions: ["--name", "mine"]`);
      const args = containerRunArgs(config, 'w.1.a', 'a');
      expect(args.filter((a) => a === '--name')).to.have.length(1);
      expect(args.slice(0, 5)).to.deep.equal(['run', '--detach', '--name', 'mine', '--label=name=w.1.a']);
      const mine = `mine-${agent.agentName}`;
      const w = busybox('named', agent.agentName);
      const named = { ...w, runtimeConfig: w.runtimeConfig.replace('["--stop-timeout", "1"]', `["--stop-timeout", "1", "--name", "${mine}"]`) };
      agent.send({ kind: 'serverHello', added: [named] });
      await agent.waitFor('named', /^Running\(Ok\)$/);
      expect(podman('ps', '--format={{.Names}}', `--filter=label=name=${instanceKey(named.instanceName)}`)).to.equal(mine);
      agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: named.instanceName, dependencies: {} }] });
      await agent.waitFor('named', /^Removed$/);
      expect(podman('ps', '--all', '--quiet', `--filter=name=^${mine}$`)).to.equal('');
    });

    // swdd~podman-delete-workload-stops-and-removes-workload~1
    it('a delete stops and removes the container', async () => {
      const w = busybox('doomed', agent.agentName);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('doomed', /^Running/);
      agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: w.instanceName, dependencies: {} }] });
      await agent.waitFor('doomed', /^Removed$/);
      expect(agent.history('doomed').slice(-2)).to.deep.equal(['Stopping(RequestedAtRuntime)', 'Removed']);
      expect(containerOf(w)).to.equal('');
    });

    // swdd~podman-delete-workload-stops-and-removes-workload~1
    it('a delete stops the container as `podman stop` would: SIGTERM first, SIGKILL only after its own stop timeout', async () => {
      const out = specFolder('ank-stop-');
      const mount = `commandOptions: ["--stop-timeout", "1", "-v", "${out}:/out"]`;
      const polite = busybox('polite', agent.agentName, { script: "trap 'echo TERM > /out/seen; exit 0' TERM; sleep 3600 & wait" });
      const stubborn = busybox('stubborn', agent.agentName, { script: "trap '' TERM; while true; do sleep 1; done" });
      const withMount = { ...polite, runtimeConfig: polite.runtimeConfig.replace('commandOptions: ["--stop-timeout", "1"]', mount) };
      agent.send({ kind: 'serverHello', added: [withMount, stubborn] });
      await agent.waitFor('polite', /^Running/);
      await agent.waitFor('stubborn', /^Running/);
      const asked = Date.now();
      const gone = (w: typeof stubborn) => ({ instanceName: w.instanceName, dependencies: {} });
      agent.send({ kind: 'updateWorkload', added: [], deleted: [gone(withMount), gone(stubborn)] });
      await agent.waitFor('polite', /^Removed$/);
      expect(readFileSync(path.join(out, 'seen'), 'utf8')).to.equal('TERM\n');
      await agent.waitFor('stubborn', /^Removed$/);
      // Podman's default is 10 s; the container's own (1 s) is what counts.
      expect(Date.now() - asked).to.be.below(8000);
      expect(containerOf(stubborn)).to.equal('');
    });

    // swdd~agent-executes-update-workload-operation~1
    it('an update replaces the container with one of the new config', async () => {
      const v1 = busybox('app', agent.agentName, { script: 'sleep 3600' });
      const v2 = busybox('app', agent.agentName, { script: 'sleep 3601' });
      agent.send({ kind: 'serverHello', added: [v1] });
      await agent.waitFor('app', /^Running/);
      agent.send({ kind: 'updateWorkload', added: [v2], deleted: [{ instanceName: v1.instanceName, dependencies: {} }] });
      await waitUntil(() => agent.states.some((s) => s.instanceName.id === v2.instanceName.id && s.executionState.state === 'Running'));
      expect(containerOf(v1)).to.equal('');
      expect(containerOf(v2)).not.to.equal('');
    });

    // swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
    it('ALWAYS runs the workload again after it exits', async () => {
      const w = busybox('phoenix', agent.agentName, { script: 'sleep 1', restartPolicy: 'Always' });
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('phoenix', /^Succeeded/);
      const first = agent.history('phoenix').indexOf('Succeeded(Ok)');
      await waitUntil(() => agent.history('phoenix').slice(first).includes('Running(Ok)'));
      expect(agent.history('phoenix').slice(first, first + 3)).to.deep.equal(['Succeeded(Ok)', 'Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
    });

    // swdd~podman-create-workload-starts-existing-workload~1, swdd~workload-control-loop-reuses-bundle-on-successful-restart~1
    it('ALWAYS after Succeeded starts the same container again (podman start), as the 1.x agent does', async () => {
      const w = busybox('again', agent.agentName, { script: 'sleep 1', restartPolicy: 'Always' });
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('again', /^Running/);
      const container = containerOf(w);
      await waitUntil(() => agent.history('again').filter((h) => h === 'Succeeded(Ok)').length >= 2);
      expect(containerOf(w), 'the same container').to.equal(container);
      expect(agent.history('again').slice(0, 6)).to.deep.equal([
        'Pending(Starting): Triggered at runtime.',
        'Running(Ok)',
        'Succeeded(Ok)',
        'Pending(Starting): Triggered at runtime.',
        'Running(Ok)',
        'Succeeded(Ok)',
      ]);
    });

    // swdd~api-workload-state-transitions~1
    it('a container stopped from outside ends as its exit says, never pinned in Stopping; restart policy and dependants act on it', async () => {
      const stubborn = busybox('stubborn', agent.agentName, { script: 'trap "" TERM; while true; do sleep 1; done', restartPolicy: 'OnFailure' });
      const polite = busybox('polite', agent.agentName, { script: 'trap "exit 0" TERM; sleep 3600 & wait' });
      const after = busybox('after', agent.agentName, { dependencies: { polite: 'Succeeded' } });
      agent.send({ kind: 'serverHello', added: [stubborn, polite, after] });
      await agent.waitFor('stubborn', /^Running/);
      await agent.waitFor('polite', /^Running/);
      execFileSync('podman', ['stop', '--time', '3', instanceKey(stubborn.instanceName)], { stdio: 'ignore' });
      execFileSync('podman', ['stop', '--time', '3', instanceKey(polite.instanceName)], { stdio: 'ignore' });
      await agent.waitFor('stubborn', /^Failed\(ExecFailed\): Exit code: '137'/);
      await agent.waitFor('polite', /^Succeeded\(Ok\)$/);
      await agent.waitFor('after', /^Running\(Ok\)$/);
      await waitUntil(() => agent.history('stubborn').filter((h) => h === 'Running(Ok)').length >= 2);
      expect(agent.history('polite').at(-1)).to.equal('Succeeded(Ok)');
      expect(agent.history('stubborn').slice(agent.history('stubborn').indexOf("Failed(ExecFailed): Exit code: '137'"))).to.deep.equal([
        "Failed(ExecFailed): Exit code: '137'",
        'Stopping(RequestedAtRuntime)',
        'Removed',
        'Pending(Starting): Triggered at runtime.',
        'Running(Ok)',
      ]);
    });

    // rx~crash-loop-backoff~1
    it('a workload that keeps exiting is restarted at once, then after 10 s: three runs in its first 15 s, not dozens', async function () {
      this.timeout(60_000);
      // A podman wrapper that counts the runs and starts.
      const dir = specFolder('ank-crash-loop-');
      const wrapper = path.join(dir, 'podman');
      const real = execFileSync('sh', ['-c', 'command -v podman'], { encoding: 'utf8' }).trim();
      writeFileSync(wrapper, `#!/bin/sh\ncase "$1" in run|start) echo "$1" >> ${dir}/calls;; esac\nexec ${real} "$@"\n`, { mode: 0o755 });
      const crashing = new PodmanAgent(uniqueAgent('crash'), undefined, harnessCli(wrapper));
      try {
        crashing.send({ kind: 'serverHello', added: [busybox('crasher', crashing.agentName, { script: 'exit 1', restartPolicy: 'Always' })] });
        await crashing.waitFor('crasher', /^Running|^Failed/);
        await new Promise((r) => setTimeout(r, 15_000));
        const starts = readFileSync(path.join(dir, 'calls'), 'utf8').trim().split('\n');
        expect(starts.length, starts.join(' ')).to.be.within(2, 3);
        expect(crashing.history('crasher')).to.include(
          "Pending(WaitingToStart): Restart 2 of a workload that keeps exiting (last: Exit code: '1'), in 10 s (crash-loop back-off).",
        );
      } finally {
        crashing.stop();
      }
    });

    it('ON_FAILURE restarts a failed container but not a succeeded one', async () => {
      const failing = busybox('retrying', agent.agentName, { script: 'sleep 1; exit 1', restartPolicy: 'OnFailure' });
      const fine = busybox('done', agent.agentName, { script: 'exit 0', restartPolicy: 'OnFailure' });
      agent.send({ kind: 'serverHello', added: [failing, fine] });
      await waitUntil(() => agent.history('retrying').filter((h) => h.startsWith('Failed')).length >= 2);
      await agent.waitFor('done', /^Succeeded/);
      await new Promise((r) => setTimeout(r, 1500));
      expect(agent.history('done').filter((h) => h.startsWith('Pending(Starting)'))).to.have.length(1);
    });

    // swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1
    it('a create that fails (no such image) is retried with backoff, the cause in each Retry report', async () => {
      const w = spec('unpullable', agent.agentName, 'podman', 'image: localhost/no-such-image:latest\n');
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('unpullable', /^Pending\(Starting\): Retry 2: .*no-such-image/);
      expect(agent.history('unpullable')[1]).to.match(/^Pending\(Starting\): Retry 1: /);
      agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: w.instanceName, dependencies: {} }] });
      await agent.waitFor('unpullable', /^Removed$/);
    });

    it('a malformed runtime config fails the create with a message naming the field, and the other workloads run', async () => {
      const noImage = spec('no_image', agent.agentName, 'podman', 'commandArgs: ["/bin/true"]\n');
      const badYaml = spec('bad_yaml', agent.agentName, 'podman', 'image: [unclosed\n');
      const wrongType = spec('wrong_type', agent.agentName, 'podman', `image: ${IMAGE}\ncommandArgs: "not a list"\n`);
      const fine = busybox('fine', agent.agentName);
      agent.send({ kind: 'serverHello', added: [noImage, badYaml, wrongType, fine] });
      await agent.waitFor('no_image', /^Pending\(StartingFailed\): The runtime config field 'image' is missing\.$/);
      await agent.waitFor('bad_yaml', /^Pending\(StartingFailed\): The runtime config is not valid YAML/);
      await agent.waitFor('wrong_type', /^Pending\(StartingFailed\): The runtime config field 'commandArgs' must be a list of strings\.$/);
      await agent.waitFor('fine', /^Running/);
    });

    // swdd~podman-state-getter-returns-lost-state~1
    it("a container removed behind the agent's back is reported Failed(Lost)", async () => {
      const w = busybox('vanishing', agent.agentName);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('vanishing', /^Running/);
      podman('rm', '--force', '--time=0', instanceKey(w.instanceName));
      await agent.waitFor('vanishing', /^Failed\(Lost\)/);
    });

    // swdd~podman-name-returns-podman~1, swdd~podman-kube-name-returns-podman-kube~1, swdd~containerd-name-returns-containerd~1
    it('the built-in runtimes are named podman, podman-kube, containerd and systemd', () => {
      const runtimes = builtInRuntimes(silentLogger, { processes: harnessProcesses() });
      expect([...runtimes.keys()]).to.deep.equal(['podman', 'podman-kube', 'containerd', 'systemd']);
      expect([...runtimes.values()].map((r) => r.name)).to.deep.equal(['podman', 'podman-kube', 'containerd', 'systemd']);
    });

    // swdd~podman-create-workload-returns-workload-id~1, swdd~podman-list-of-existing-workloads-uses-labels~1, swdd~podman-get-workload-id-uses-label~1
    it('the id is the container id; the agent label lists the workloads, the name label finds one', async () => {
      const runtime = builtInRuntimes(silentLogger, { processes: harnessProcesses() }).get('podman') as RuntimeConnector<string>;
      const w = busybox('direct', agent.agentName);
      const id = await firstValueFrom(runtime.createWorkload(w, {}));
      expect(podman('inspect', instanceKey(w.instanceName), '--format={{.Id}}')).to.equal(id);
      const other = uniqueAgent();
      const stranger = await firstValueFrom(runtime.createWorkload(busybox('direct', other), {}));
      try {
        const existing = await firstValueFrom(runtime.listReusableWorkloads(agent.agentName));
        expect(existing.map((e) => [e.instanceName, e.id, e.state.state])).to.deep.equal([[w.instanceName, id, 'Running']]);
        expect(await firstValueFrom(runtime.getWorkloadId(w.instanceName))).to.equal(id);
      } finally {
        podman('rm', '--force', '--time=0', stranger);
      }
    });

    // swdd~podman-create-workload-deletes-failed-container~1
    it('a container that cannot start is removed again', async () => {
      const runtime = builtInRuntimes(silentLogger, { processes: harnessProcesses() }).get('podman') as RuntimeConnector<string>;
      const w = spec('broken', agent.agentName, 'podman', `image: ${IMAGE}\ncommandArgs: ["/no/such/program"]\n`);
      const error = await firstValueFrom(runtime.createWorkload(w, {})).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.match(/no\/such\/program|no such file/i);
      expect(containerOf(w)).to.equal('');
    });

    // swdd~podman-state-getter-reset-cache~1, swdd~podman-create-workload-returns-workload-id~1
    it("a burst of creates is reported Running from each `podman run`'s return: no podman ps for the new containers", async () => {
      let lists = 0;
      const cli = harnessCli('podman', { observe: (call) => void (call.subcommand === 'ps' && lists++) });
      // Verification every 10 minutes: every podman ps here would be one a new workload's watcher asked for.
      const watcher = new PodmanAgent(uniqueAgent(), undefined, cli, { service: specService(), verifyMs: 600_000 });
      try {
        const first = busybox('first', watcher.agentName);
        watcher.send({ kind: 'serverHello', added: [first] });
        await watcher.waitFor('first', /^Running\(Ok\)$/);
        const before = lists;
        const burst = Array.from({ length: 10 }, (_, i) => busybox(`burst${i}`, watcher.agentName));
        watcher.send({ kind: 'updateWorkload', added: burst, deleted: [] });
        await Promise.all(burst.map((w) => watcher.waitFor(w.instanceName.workloadName, /^Running\(Ok\)$/)));
        expect(lists - before).to.equal(0);
        expect(watcher.history('burst0')).to.deep.equal(['Pending(Starting): Triggered at runtime.', 'Running(Ok)']);
      } finally {
        watcher.stop();
      }
    });

    // swdd~podmancli-uses-container-state-cache~1, swdd~podmancli-container-state-cache-refresh~1
    it('50 sleeping workloads cost one podman ps per 10 s in total on events, one per second with events off', async function () {
      this.timeout(150_000);
      /** The podman calls of `watcher` over `seconds` (through the service or not), once its 50 workloads run. */
      let calls = 0;
      const counted = () => harnessCli('podman', { observe: () => calls++ });
      const callsOver = async (watcher: PodmanAgent, seconds: number) => {
        const workloads = Array.from({ length: 50 }, (_, i) => busybox(`sleeper${i}`, watcher.agentName));
        watcher.send({ kind: 'serverHello', added: workloads });
        await waitUntil(() => workloads.every((w) => watcher.history(w.instanceName.workloadName).includes('Running(Ok)')), 90_000);
        await new Promise((r) => setTimeout(r, 1500));
        const before = calls;
        await new Promise((r) => setTimeout(r, seconds * 1000));
        return calls - before;
      };
      // 20 s on events: two verifications, a third where the window cuts across their period.
      const onEvents = new PodmanAgent(uniqueAgent(), undefined, counted(), { service: specService() });
      try {
        expect(await callsOver(onEvents, 20)).to.be.within(1, 3);
      } finally {
        onEvents.stop();
      }
      const polling = new PodmanAgent(uniqueAgent(), undefined, counted(), { events: false });
      try {
        expect((await callsOver(polling, 5)) / 5).to.be.within(0.6, 1.4);
      } finally {
        polling.stop();
      }
    });
  });

  describe('podman-kube', () => {
    const kube = (name: string, podName: string, script?: string) => kubePod(name, agent.agentName, podName, [{ name: 'main', script }]);

    // swdd~agent-supports-podman-kube-runtime~1, swdd~podman-kube-uses-podman-cli~1, swdd~podman-kube-create-workload-apply-manifest~1, swdd~podman-kube-state-getter-combines-states~2, swdd~podman-kube-create-workload-creates-config-volume~1, swdd~podman-kube-create-workload-creates-pods-volume~1, swdd~podman-kube-delete-workload-downs-manifest-file~1, swdd~podman-kube-delete-removes-volumes~1
    it('a pod runs, is reported, and is torn down with its volumes', async () => {
      const pod = `${agent.agentName}-pod`.replace(/_/g, '-');
      const w = kube('pod', pod);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('pod', /^Running\(Ok\)$/);
      const key = instanceKey(w.instanceName);
      expect(podman('volume', 'ls', '--quiet').split('\n')).to.include.members([`${key}.config`, `${key}.pods`]);
      agent.send({ kind: 'updateWorkload', added: [], deleted: [{ instanceName: w.instanceName, dependencies: {} }] });
      await agent.waitFor('pod', /^Removed$/);
      expect(podman('pod', 'ps', '--quiet', `--filter=name=^${pod}$`)).to.equal('');
      expect(podman('volume', 'ls', '--quiet').split('\n')).not.to.include(`${key}.config`);
    });

    // swdd~podman-kube-state-getter-treats-missing-pods-as-unknown~1
    it('a pod removed from outside (podman pod rm -f) is Failed(Unknown), never Removed', async () => {
      const pod = `${agent.agentName}-gone`.replace(/_/g, '-');
      const w = kube('gone', pod);
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('gone', /^Running\(Ok\)$/);
      podman('pod', 'rm', '--force', '--time=0', pod);
      await agent.waitFor('gone', /^Failed\(Unknown\)/);
      await new Promise((r) => setTimeout(r, 1500));
      expect(agent.history('gone')).not.to.include('Removed');
      expect(agent.history('gone').at(-1)).to.match(/^Failed\(Unknown\)/);
    });

    // swdd~podman-kube-state-getter-maps-state~2
    it('a pod whose container exits 0 is Succeeded; exit 4 is Failed', async () => {
      const ok = kube('ok', `${agent.agentName}-ok`.replace(/_/g, '-'), 'sleep 1; exit 0');
      const bad = kube('bad', `${agent.agentName}-bad`.replace(/_/g, '-'), 'sleep 1; exit 4');
      agent.send({ kind: 'serverHello', added: [ok, bad] });
      await agent.waitFor('ok', /^Succeeded\(Ok\)$/);
      await agent.waitFor('bad', /^Failed\(ExecFailed\): Exit code: '4'$/);
    });

    // swdd~podman-kube-list-existing-workloads-using-config-volumes~1, swdd~podman-kube-get-workload-id-uses-volumes~1, swdd~podman-kube-create-workload-returns-workload-id~1
    it('a pod of an earlier run is found through its volumes', async () => {
      const w = kube('found', `${agent.agentName}-found`.replace(/_/g, '-'));
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('found', /^Running/);
      const runtime = builtInRuntimes(silentLogger, { processes: harnessProcesses() }).get('podman-kube') as RuntimeConnector<KubeId>;
      const existing = await firstValueFrom(runtime.listReusableWorkloads(agent.agentName));
      expect(existing).to.have.length(1);
      expect(existing[0].instanceName).to.deep.equal(w.instanceName);
      expect(existing[0].state).to.deep.equal(ExecutionState.running());
      expect(await firstValueFrom(runtime.getWorkloadId(w.instanceName))).to.deep.equal(existing[0].id);
    });

    // swdd~podman-kube-list-existing-workloads-using-config-volumes~1
    it("an agent without pods of its own finds none in one Podman call, passing over another agent's volumes", async () => {
      const name = uniqueAgent();
      const others = [`w.1.${name}_x.config`, `w.1.x${name}.config`, `w.1.${name}.configs`];
      for (const volume of others) podman('volume', 'create', volume);
      try {
        const cli = new PodmanCli(harnessCli('podman'));
        const runtime = new PodmanKubeRuntime(cli, () => NEVER);
        expect(await firstValueFrom(runtime.listReusableWorkloads(name))).to.deep.equal([]);
        expect(cli.calls, 'a `podman volume ls`, no `podman ps`').to.equal(1);
      } finally {
        podman('volume', 'rm', ...others);
      }
    });

    // swdd~podman-kube-create-workload-returns-workload-id~1
    it('a create returns the id the runtime keeps: the instance, the pods it played, the manifest and the down options', async () => {
      const pod = `${agent.agentName}-direct`.replace(/_/g, '-');
      const w = kube('direct', pod);
      const runtime = builtInRuntimes(silentLogger, { processes: harnessProcesses() }).get('podman-kube') as RuntimeConnector<KubeId>;
      const id = await lastValueFrom(runtime.createWorkload(w, {}));
      try {
        expect(id.instance).to.equal(instanceKey(w.instanceName));
        expect(id.pods).to.deep.equal([podman('pod', 'inspect', pod, '--format={{.ID}}')]);
        expect(id.manifest, 'the manifest as the workload gave it').to.equal(parseKubeConfig(w.runtimeConfig).manifest);
        expect(id.manifest).to.contain(`name: ${pod}`);
        expect(id.downOptions).to.deep.equal([]);
      } finally {
        await lastValueFrom(runtime.deleteWorkload(id), { defaultValue: undefined });
      }
      expect(podman('pod', 'ps', '--quiet', `--filter=name=^${pod}$`)).to.equal('');
    });

    // swdd~podman-kube-create-continues-if-cannot-create-volume~1
    it('the pod is played even when its volumes cannot be made', async () => {
      const w = kube('novolume', `${agent.agentName}-novolume`.replace(/_/g, '-'));
      const key = instanceKey(w.instanceName);
      podman('volume', 'create', `${key}.config`); // taken: the agent's own volume create fails
      agent.send({ kind: 'serverHello', added: [w] });
      await agent.waitFor('novolume', /^Running\(Ok\)$/);
    });

    it('reads the pod ids out of `kube play` output', () => {
      expect(podsPlayed('Pod:\nabc123abc123abc123\nContainer:\ndef456def456def456\n')).to.deep.equal(['abc123abc123abc123']);
    });
  });
});

async function waitUntil(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  for (let waited = 0; !condition(); waited += 100) {
    if (waited > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
