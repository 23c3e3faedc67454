import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { EMPTY, VirtualTimeScheduler, forkJoin, lastValueFrom, of } from 'rxjs';
import { ImagePulls, type PullEngine } from '../../lib/runtimes/containers/image-pulls.js';
import { ImageCollector } from '../../lib/runtimes/containers/image-gc.js';
import { ImageRecord } from '../../lib/runtimes/containers/image-record.js';
import { PodmanRuntime } from '../../lib/runtimes/podman/runtime.js';
import { parseContainerConfig } from '../../lib/runtimes/containers/run-config.js';
import { parseKubeConfig } from '../../lib/runtimes/podman/kube-config.js';
import { kubeImagePulls, podmanImagePull } from '../../lib/runtimes/podman/images.js';
import { nerdctlImagePull } from '../../lib/runtimes/containerd/nerdctl.js';
import { ContainerdRuntime } from '../../lib/runtimes/containerd/runtime.js';
import { PodmanKubeRuntime } from '../../lib/runtimes/podman/kube.js';
import { PodmanCli } from '../../lib/runtimes/podman/podman-cli.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { harnessCli } from '../../scripts/harness/processes.js';
import type { WorkloadSpec } from '../../lib/workload.js';
import { specFolder } from '../../scripts/harness/temp.js';

const pullOf = (options: string[], general: string[] = []) =>
  podmanImagePull(
    parseContainerConfig(`image: reg.example:5000/app:2\ngeneralOptions: ${JSON.stringify(general)}\ncommandOptions: ${JSON.stringify(options)}`),
  );

// rx~pull-ahead-registry~1
describe("an image pulled ahead (the workload's registry options and --pull policy)", () => {
  it('takes the run options that say how to reach or choose the image, in both spellings, and leaves the others', () => {
    const pull = pullOf(
      [
        '--tls-verify=false',
        '--authfile',
        '/etc/auth.json',
        '--creds=u:p',
        '--cert-dir',
        '/certs',
        '--platform',
        'linux/arm64',
        '--arch=arm64',
        '--os',
        'linux',
        '--variant',
        'v8',
        '--network=host',
        '-p',
        '80:80',
      ],
      ['--root', '/var/lib/other'],
    );
    expect(pull.args).to.deep.equal([
      '--root',
      '/var/lib/other',
      'pull',
      '--quiet',
      '--tls-verify=false',
      '--authfile=/etc/auth.json',
      '--creds=u:p',
      '--cert-dir=/certs',
      '--platform=linux/arm64',
      '--arch=arm64',
      '--os=linux',
      '--variant=v8',
      'reg.example:5000/app:2',
    ]);
    expect(pull.policy).to.equal('missing');
  });

  it('follows --pull: with never nothing is pulled ahead; always and newer pull each time; missing only when the image is not there', () => {
    expect(pullOf(['--pull=never']).policy).to.equal('never');
    expect(pullOf(['--pull', 'always']).policy).to.equal('always');
    expect(pullOf(['--pull=newer']).policy).to.equal('always');
    expect(pullOf(['--pull=missing']).policy).to.equal('missing');
    expect(pullOf([]).policy).to.equal('missing');
  });

  it('a flag at the end without its value is passed on as given, for Podman to refuse as the run would', () => {
    expect(pullOf(['--creds']).args).to.include('--creds=');
  });

  it('an update to the image its current instance runs, from the same storage, has nothing to fetch (no podman call)', () => {
    const runtime = new PodmanRuntime(new PodmanCli(harnessCli('/nonexistent/podman')), () => EMPTY);
    const at = (config: string) => ({ ...workload('web', { config }), runtime: 'podman' });
    const current = at('image: app:1\ncommandOptions: ["-e", "A=1"]');
    expect(runtime.imagesToFetch(at('image: app:1\ncommandOptions: ["-e", "A=2"]'), current)).to.deep.equal([]);
    expect(runtime.imagesToFetch(at('image: app:2'), current)).to.deep.equal(['app:2']);
    expect(runtime.imagesToFetch(at('image: app:1\ncommandOptions: ["--pull=always"]'), current)).to.deep.equal(['app:1']);
    expect(runtime.imagesToFetch(at('image: app:1\ngeneralOptions: ["--root", "/other"]'), current)).to.deep.equal(['app:1']);
    expect(runtime.imagesToFetch(at('image: app:1\ncommandOptions: ["--pull=never"]'))).to.deep.equal([]);
    // What the CLI would read as an option is no image to pull.
    expect(runtime.imagesToFetch(at('image: --authfile=/etc/shadow'))).to.deep.equal([]);
  });

  it("is the same for a containerd workload, in its scope, with the options nerdctl's pull takes (its registry TLS is a general option)", () => {
    const config = parseContainerConfig(
      'image: reg.example:5000/app:2\ncommandOptions: ["--platform", "linux/arm64", "--verify=cosign", "--cosign-key", "/k.pub", "--tls-verify=false", "--pull=always"]',
    );
    const pull = nerdctlImagePull(config, ['--namespace', 'edge', '--insecure-registry']);
    expect(pull.policy).to.equal('always');
    expect(pull.args).to.deep.equal([
      '--namespace',
      'edge',
      '--insecure-registry',
      'pull',
      '--quiet',
      '--platform=linux/arm64',
      '--verify=cosign',
      '--cosign-key=/k.pub',
      'reg.example:5000/app:2',
    ]);
    expect(pull.present).to.deep.equal(['--namespace', 'edge', '--insecure-registry', 'image', 'inspect', '--format', '{{.ID}}', 'reg.example:5000/app:2']);
  });

  it("of a podman-kube workload, is each container's image of its Pods and Deployments, by imagePullPolicy, with the play options of a pull", () => {
    const manifest = [
      'apiVersion: v1',
      'kind: Pod',
      'metadata: {name: web}',
      'spec:',
      '  initContainers: [{name: init, image: reg.example/init:1, imagePullPolicy: never}]',
      '  containers: [{name: a, image: reg.example/a:1}, {name: b, image: reg.example/b:1, imagePullPolicy: Always}, {name: c, image: reg.example/a:1}]',
      '---',
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata: {name: api}',
      'spec: {template: {spec: {containers: [{name: d, image: reg.example/d:1, imagePullPolicy: IfNotPresent}]}}}',
      '---',
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata: {name: settings}',
      'data: {image: not-an-image}',
    ].join('\n');
    const config = (play: string[]) =>
      parseKubeConfig(`generalOptions: ["--root", "/r"]\nplayOptions: ${JSON.stringify(play)}\nmanifest: ${JSON.stringify(manifest)}`);
    const pulls = kubeImagePulls(config(['--tls-verify=false', '--creds', 'u:p', '--replace']));
    expect(pulls.map((p) => `${p.policy} ${p.image}`)).to.deep.equal([
      'never reg.example/init:1',
      'missing reg.example/a:1',
      'always reg.example/b:1',
      'missing reg.example/d:1',
    ]);
    expect(pulls[1].args).to.deep.equal(['--root', '/r', 'pull', '--quiet', '--tls-verify=false', '--creds=u:p', 'reg.example/a:1']);
    expect(pulls[1].present).to.deep.equal(['--root', '/r', 'image', 'exists', 'reg.example/a:1']);
    // Podman builds the images of a play with --build; a manifest it cannot read is its play's to refuse.
    expect(kubeImagePulls(config(['--build']))).to.deep.equal([]);
    expect(kubeImagePulls(parseKubeConfig('manifest: "kind: Pod\\nspec: [unclosed"'))).to.deep.equal([]);
    const laughs = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      ...Array.from(
        { length: 8 },
        (_, i) =>
          `${'bcdefghi'[i]}: &${'bcdefghi'[i]} [*${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}, *${'abcdefgh'[i]}]`,
      ),
    ];
    expect(kubeImagePulls(parseKubeConfig(`manifest: ${JSON.stringify(laughs.join('\n'))}`))).to.deep.equal([]);
  });

  it('an update of a containerd or podman-kube workload to the images its current instance runs has nothing to fetch', () => {
    const cli = harnessCli('/nonexistent/nerdctl');
    const containerd = new ContainerdRuntime(cli, () => () => EMPTY);
    const at = (runtime: string, config: string) => ({ ...workload('web', { config }), runtime });
    const current = at('containerd', 'image: app:1');
    expect(containerd.imagesToFetch(at('containerd', 'image: app:1\ncommandOptions: ["-e", "A=2"]'), current)).to.deep.equal([]);
    expect(containerd.imagesToFetch(at('containerd', 'image: app:2'), current)).to.deep.equal(['app:2']);
    expect(containerd.imagesToFetch(at('containerd', 'image: app:1\ngeneralOptions: ["--namespace", "other"]'), current)).to.deep.equal(['app:1']);
    const kube = new PodmanKubeRuntime(new PodmanCli(harnessCli('/nonexistent/podman')), () => EMPTY);
    const pod = (image: string, env = 'x') =>
      at(
        'podman-kube',
        `manifest: ${JSON.stringify(`kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: ${image}, env: [{name: E, value: ${env}}]}]}`)}`,
      );
    expect(kube.imagesToFetch(pod('app:1', 'y'), pod('app:1'))).to.deep.equal([]);
    expect(kube.imagesToFetch(pod('app:2'), pod('app:1'))).to.deep.equal(['app:2']);
  });
});

// rx~pull-ahead~1
describe('a pull ahead, as the CLI runs it (scripts in the place of podman and sync)', () => {
  /** `podman` and `sync` that write each call to a shared log; `podman image exists` says `present`, `podman pull` exits `pullExit`. */
  const folders: string[] = [];
  after(() => folders.forEach((folder) => rmSync(folder, { recursive: true, force: true })));
  function fakeClis(present: boolean, pullExit = 0) {
    const folder = specFolder('ank-pulls-');
    folders.push(folder);
    const log = path.join(folder, 'calls');
    const script = (name: string, body: string) => {
      writeFileSync(path.join(folder, name), `#!/bin/sh\necho "${name} $*" >> ${log}\n${body}\n`, { mode: 0o755 });
      return path.join(folder, name);
    };
    const podman = script('podman', `case "$1 $2" in "image exists") exit ${present ? 0 : 1};; pull*) echo 'Error: denied' >&2; exit ${pullExit};; esac`);
    const sync = script('sync', 'exit 0');
    const calls = () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []);
    const cli = new PodmanCli(harnessCli(podman));
    // Podman's pulls, their flush by the script in the place of sync.
    const engine: PullEngine = {
      pull: (p, call) => cli.pull(p, call),
      present: (p) => cli.present(p),
      flush: () => harnessCli(sync).run([]),
      deadlineOf: (k) => cli.deadlineOf(k),
    };
    return { pulls: new ImagePulls(engine), calls, podman };
  }
  const image = podmanImagePull(parseContainerConfig('image: reg.example/app:2'));

  it('flushes the pulled layers to disk (sync) before the pull counts as done, so before the old instance stops', async () => {
    const { pulls, calls } = fakeClis(false);
    await lastValueFrom(pulls.ensure(image), { defaultValue: undefined });
    expect(calls()).to.deep.equal(['podman image exists reg.example/app:2', 'podman pull --quiet reg.example/app:2', 'sync']);
  });

  /** A collector on a fake engine whose image `reg.example/app:2` is `i1`, and its record. */
  const collector = () => {
    const record = new ImageRecord(undefined, 'fake');
    const engine = {
      name: 'fake',
      imagesInUse: () => of(new Set<string>()),
      describe: () => of({ id: 'i1', names: ['reg.example/app:2'] }),
      remove: () => of(''),
      storeFolder: () => of('/'),
      tag: () => of(''),
      untag: () => of(''),
    };
    return {
      gc: new ImageCollector(engine, record, { high: 85, low: 80, minAgeMs: 1000 }),
      recorded: () => record.of('fake').map((r) => `${r.image} ${r.id}`),
    };
  };

  // rx~image-gc~1
  it('a burst of creates of an image that is there asks once whether it is, pulls nothing and records nothing: the image is not the agent’s', async () => {
    const { calls, podman } = fakeClis(true);
    const { gc, recorded } = collector();
    const pulls = new ImagePulls(new PodmanCli(harnessCli(podman)), { gc });
    const creates = Array.from({ length: 5 }, (_, i) => pulls.creating([image], of(`container ${i}`)));
    expect(await lastValueFrom(forkJoin(creates))).to.deep.equal(['container 0', 'container 1', 'container 2', 'container 3', 'container 4']);
    expect(calls().filter((c) => c.startsWith('podman image exists'))).to.have.length(1);
    expect(calls().filter((c) => c.startsWith('podman pull'))).to.deep.equal([]);
    expect(recorded()).to.deep.equal([]);
    await lastValueFrom(pulls.creating([image], of('later')));
    expect(
      calls().filter((c) => c.startsWith('podman image exists')),
      'a create after the burst asks again',
    ).to.have.length(2);
  });

  // rx~image-gc~1
  it('creates that come while a check of their image is under way wait for its answer and do not ask again', async () => {
    const { calls, podman } = fakeClis(true);
    // The check takes a while: the burst's other creates come meanwhile, as a server's workloads do one by one.
    writeFileSync(podman, readFileSync(podman, 'utf8').replace('"image exists") exit 0', '"image exists") sleep 0.3; exit 0'));
    const { gc } = collector();
    const pulls = new ImagePulls(new PodmanCli(harnessCli(podman)), { gc });
    const first = lastValueFrom(pulls.creating([image], of('container 0')));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const rest = Array.from({ length: 4 }, (_, i) => lastValueFrom(pulls.creating([image], of(`container ${i + 1}`))));
    expect(await Promise.all([first, ...rest])).to.have.length(5);
    expect(calls().filter((c) => c.startsWith('podman image exists'))).to.have.length(1);
  });

  // rx~image-gc~1
  it('a burst of creates of a missing image: the agent pulls it once itself before them, and records it as its pull printed it', async () => {
    const { calls, podman } = fakeClis(false);
    // The pull prints the id of what it fetched, as `podman pull --quiet` does.
    writeFileSync(podman, readFileSync(podman, 'utf8').replace("pull*) echo 'Error: denied' >&2; exit 0;;", 'pull*) echo i1; exit 0;;'));
    const { gc, recorded } = collector();
    const pulls = new ImagePulls(new PodmanCli(harnessCli(podman)), { gc });
    const creates = Array.from({ length: 5 }, (_, i) => pulls.creating([image], of(`container ${i}`)));
    expect(await lastValueFrom(forkJoin(creates))).to.have.length(5);
    expect(calls().filter((c) => c.startsWith('podman pull'))).to.deep.equal(['podman pull --quiet reg.example/app:2']);
    expect(recorded()).to.deep.equal(['reg.example/app:2 i1']);
  });

  // rx~pull-ahead~1, rx~image-gc~1
  it("deciding an update's pull ahead runs nothing and tells the collector nothing: both come when the pull is subscribed", async () => {
    const { calls, podman } = fakeClis(true);
    const gc = new ImageCollector(
      {
        name: 'fake',
        imagesInUse: () => of(new Set<string>()),
        describe: () => of(undefined),
        remove: () => of(''),
        storeFolder: () => of('/'),
        tag: () => of(''),
        untag: () => of(''),
      },
      new ImageRecord(undefined, 'fake'),
      { high: 85, low: 80, minAgeMs: 1000 },
      {},
      // Virtual time: the hold's hour-long timer keeps no test process alive.
      new VirtualTimeScheduler(),
    );
    const wanted: string[] = [];
    gc.want = (pull) => wanted.push(pull.image);
    const pulls = new ImagePulls(new PodmanCli(harnessCli(podman)), { gc });
    const spec = (tag: string) => ({ runtime: 'podman', runtimeConfig: `image: reg.example/app:${tag}` }) as unknown as WorkloadSpec;
    const pullsOf = (s: WorkloadSpec) => [podmanImagePull(parseContainerConfig(s.runtimeConfig))];
    const images = pulls.toFetch(pullsOf, spec('2'), spec('1'));
    expect(images, 'a new image is to be pulled').to.deep.equal(['reg.example/app:2']);
    const pull$ = pulls.fetch(pullsOf, spec('2'), images);
    expect([wanted, calls()]).to.deep.equal([[], []]);
    await lastValueFrom(pull$, { defaultValue: undefined });
    expect(wanted).to.deep.equal(['reg.example/app:2']);
    expect(calls()).to.deep.equal(['podman image exists reg.example/app:2']);
  });

  it('an image that is there is neither pulled nor flushed; a pull that fails is not flushed and fails with the reason', async () => {
    const there = fakeClis(true);
    await lastValueFrom(there.pulls.ensure(image), { defaultValue: undefined });
    expect(there.calls()).to.deep.equal(['podman image exists reg.example/app:2']);
    const denied = fakeClis(false, 125);
    const failure = await lastValueFrom(denied.pulls.ensure(image), { defaultValue: undefined }).catch((err: Error) => err);
    expect(failure).to.be.instanceOf(Error).with.property('message', 'denied');
    expect(denied.calls()).to.deep.equal(['podman image exists reg.example/app:2', 'podman pull --quiet reg.example/app:2']);
  });
});
