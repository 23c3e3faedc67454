import type { Container } from '../../lib/ports.js';
import { expect } from 'chai';
import { fromBase64, toBase64 } from '../../lib/runtimes/podman/kube.js';
import { type ExecutionState, formatState } from '../../lib/execution-state.js';
import { kubeContainerState, kubeWorkloadState, podmanReading, podmanState } from '../../lib/runtimes/podman/container-state.js';
import { parse as parseYaml } from 'yaml';
import { RuntimeConfigError } from '../../lib/runtimes/base/run-config.js';
import { containerRunArgs, parseContainerConfig } from '../../lib/runtimes/containers/run-config.js';
import { NO_CONTROL_INTERFACE_TARGET, parseKubeConfig, probedContainers, withControlInterface } from '../../lib/runtimes/podman/kube-config.js';

const c = (state: string, exitCode = 0, pod = ''): Container => ({ id: 'x', state, exitCode, pod });
const shown = (s: ExecutionState) => formatState(s);

describe('Podman state tables', () => {
  // swdd~podman-state-getter-maps-state~3
  it("maps container states and exit codes, Podman's state word as the additional info", () => {
    const table: Array<[string, number, string]> = [
      ['created', 0, 'Pending(Starting): created'],
      ['configured', 0, 'Pending(Starting): configured'],
      ['initialized', 0, 'Pending(Starting): initialized'],
      ['paused', 0, 'Failed(Unknown): paused'],
      ['running', 0, 'Running(Ok)'],
      ['exited', 0, 'Succeeded(Ok)'],
      ['exited', 7, "Failed(ExecFailed): Exit code: '7'"],
      ['stopping', 0, 'Stopping(Stopping): stopping'],
      ['stopped', 0, 'Stopping(Stopping): stopped'],
      ['removing', 0, 'Stopping(Stopping): removing'],
      ['dead', 0, 'Failed(Unknown): dead'],
    ];
    for (const [state, code, expected] of table) expect(shown(podmanState(c(state, code))), state).to.equal(expected);
  });

  // swdd~podman-kube-state-getter-maps-state~2
  it("maps kube container states, with the released agent's texts", () => {
    const table: Array<[string, number, string]> = [
      ['created', 0, 'Pending(Starting): starting container'],
      ['configured', 0, 'Pending(Starting): starting container'],
      ['initialized', 0, 'Pending(Starting): starting container'],
      ['paused', 0, 'Failed(Unknown): unknown container state'],
      ['running', 0, 'Running(Ok)'],
      ['exited', 0, 'Succeeded(Ok)'],
      ['exited', 2, "Failed(ExecFailed): Exit code: '2'"],
      ['stopping', 0, 'Stopping(Stopping): stopping container'],
      ['stopped', 0, 'Stopping(Stopping): stopping container'],
      ['removing', 0, 'Stopping(Stopping): stopping container'],
    ];
    for (const [state, code, expected] of table) expect(shown(kubeContainerState(c(state, code))), state).to.equal(expected);
  });

  // swdd~podman-kube-state-getter-combines-states~2, swdd~podman-kube-state-getter-uses-container-states~1
  it('the lowest priority wins: Failed < Starting < Unknown < Running < Stopping < Succeeded', () => {
    const combine = (...states: Array<[string, number?]>) =>
      shown(
        kubeWorkloadState(
          ['p1'],
          states.map(([s, code]) => c(s, code, 'p1')),
        ),
      );
    expect(combine(['exited', 0], ['running'], ['exited', 1])).to.equal("Failed(ExecFailed): Exit code: '1'");
    expect(combine(['exited', 0], ['running'], ['created'])).to.equal('Pending(Starting): starting container');
    expect(combine(['running'], ['paused'])).to.equal('Failed(Unknown): unknown container state');
    expect(combine(['exited', 0], ['running'])).to.equal('Running(Ok)');
    expect(combine(['exited', 0], ['stopping'])).to.equal('Stopping(Stopping): stopping container');
    expect(combine(['exited', 0], ['exited', 0])).to.equal('Succeeded(Ok)');
  });

  // swdd~podman-kube-state-getter-treats-missing-pods-as-unknown~1
  it('a missing pod is one unknown container, so pods gone from outside are Failed(Unknown), never Removed; a workload without any pod is Failed(Lost); the infra container counts like any other', () => {
    expect(shown(kubeWorkloadState(['p1', 'p2'], [c('exited', 0, 'p1')]))).to.equal('Failed(Unknown): unknown container state');
    expect(shown(kubeWorkloadState(['p1', 'p2'], []))).to.equal('Failed(Unknown): unknown container state');
    expect(shown(kubeWorkloadState([], []))).to.equal('Failed(Lost)');
    expect(shown(kubeWorkloadState(['p1'], [{ ...c('running', 0, 'p1'), isInfra: true }, c('exited', 0, 'p1')]))).to.equal('Running(Ok)');
    expect(shown(kubeWorkloadState(['p1'], [{ ...c('exited', 0, 'p1'), isInfra: true }, c('exited', 0, 'p1')]))).to.equal('Succeeded(Ok)');
  });

  // swdd~podman-state-getter-uses-podmancli~1, swdd~podman-state-getter-returns-lost-state~1
  it('reads a workload out of a snapshot by its container id; a container not in it is Failed(Lost)', () => {
    const snapshot = new Map(
      Array.from({ length: 1000 }, (_, i): [string, Container] => [`id${i}`, { id: `id${i}`, state: i % 2 ? 'running' : 'exited', exitCode: 0 }]),
    );
    expect(shown(podmanReading('id999')(snapshot).state)).to.equal('Running(Ok)');
    expect(shown(podmanReading('id998')(snapshot).state)).to.equal('Succeeded(Ok)');
    expect(shown(podmanReading('id1000')(snapshot).state)).to.equal('Failed(Lost)');
  });
});

describe('runtime configs', () => {
  // swdd~podman-create-workload-mounts-fifo-files~1
  it('builds `podman run` as the wire facts give it, mounting the Control Interface at /run/ankaios/control_interface', () => {
    const config = parseContainerConfig(
      'image: img\ngeneralOptions: ["--log-level", "info"]\ncommandOptions: ["-e", "A=1"]\ncommandArgs: ["sh", "-c", "true"]',
    );
    expect(containerRunArgs(config, 'w.h.a', 'a', { controlInterfacePath: '/run/x', fileMounts: [{ hostPath: '/h/f', mountPoint: '/etc/f' }] })).to.deep.equal([
      '--log-level',
      'info',
      'run',
      '--detach',
      '--name',
      'w.h.a',
      '-e',
      'A=1',
      '--mount=type=bind,source=/run/x,destination=/run/ankaios/control_interface',
      '--mount=type=bind,source=/h/f,destination=/etc/f,readonly=true',
      '--label=name=w.h.a',
      '--label=agent=a',
      'img',
      'sh',
      '-c',
      'true',
    ]);
  });

  it('names the field that is wrong', () => {
    const error = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).to.be.instanceOf(RuntimeConfigError);
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(error(() => parseContainerConfig('commandArgs: []'))).to.equal("The runtime config field 'image' is missing.");
    expect(error(() => parseContainerConfig('image: 3'))).to.equal("The runtime config field 'image' must be a string.");
    expect(error(() => parseContainerConfig('image: x\ncommandOptions: {a: 1}'))).to.equal(
      "The runtime config field 'commandOptions' must be a list of strings.",
    );
    expect(error(() => parseContainerConfig('- just\n- a list'))).to.equal('The runtime config must be a YAML mapping.');
    expect(error(() => parseContainerConfig('image: "unclosed'))).to.match(/^The runtime config is not valid YAML/);
    expect(error(() => parseKubeConfig('playOptions: []'))).to.equal("The runtime config field 'manifest' is missing.");
  });
});

describe('podman-kube: the Control Interface target', () => {
  const pod =
    'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  volumes: [{name: data, emptyDir: {}}]\n  containers:\n  - name: app\n    image: x\n  - name: proxy\n    image: y\n';

  // swdd~podman-kube-injects-control-interface-volume~1, swdd~podman-kube-injects-control-interface-volume-mount~1, swdd~podman-kube-mounts-control-interface~2
  it('adds a hostPath volume "control-interface-volume" of the folder and mounts it at /run/ankaios/control_interface in the target container only', () => {
    const doc = parseYaml(withControlInterface(pod, 'web/proxy', '/run/io/w.1/control_interface'));
    expect(doc.spec.volumes).to.deep.equal([
      { name: 'data', emptyDir: {} },
      { name: 'control-interface-volume', hostPath: { path: '/run/io/w.1/control_interface', type: 'Directory' } },
    ]);
    expect(doc.spec.containers[1].volumeMounts).to.deep.equal([{ name: 'control-interface-volume', mountPath: '/run/ankaios/control_interface' }]);
    expect(doc.spec.containers[0].volumeMounts).to.equal(undefined);
  });

  // swdd~podman-kube-mounts-control-interface~2
  it("a Deployment's pod is named as Podman names it, <deployment>-pod", () => {
    const deployment =
      'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: mydep\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: x\n';
    const doc = parseYaml(withControlInterface(deployment, 'mydep-pod/app', '/run/io/w.1/control_interface'));
    expect(doc.spec.template.spec.containers[0].volumeMounts).to.deep.equal([
      { name: 'control-interface-volume', mountPath: '/run/ankaios/control_interface' },
    ]);
    expect(() => withControlInterface(deployment, 'mydep/app', '/x')).to.throw(
      RuntimeConfigError,
      "Cannot add Control Interface. Target pod not found 'mydep'",
    );
  });

  // swdd~podman-kube-validates-target-path-format~1
  it("refuses no target, a malformed one, and one whose pod or container is not there, in the released agent's words", () => {
    expect(() => withControlInterface(pod, undefined, '/x')).to.throw(RuntimeConfigError, NO_CONTROL_INTERFACE_TARGET);
    for (const malformed of ['web', 'web/app/x', '/app', 'web/']) {
      expect(() => withControlInterface(pod, malformed, '/x')).to.throw(
        RuntimeConfigError,
        `Invalid control interface target format: '${malformed}'. Expected format: '<pod_name>/<container_name>'`,
      );
    }
    expect(() => withControlInterface(pod, 'web/db', '/x')).to.throw(RuntimeConfigError, "Cannot add Control Interface. Target container 'db' not found.");
    expect(() => withControlInterface(pod, 'other/app', '/x')).to.throw(RuntimeConfigError, "Cannot add Control Interface. Target pod not found 'other'");
    expect(parseKubeConfig('manifest: x\ncontrolInterfaceTarget: web/app\n').controlInterfaceTarget).to.equal('web/app');
  });
});

describe('podman-kube: the containers Podman gives a health check', () => {
  // rx~health-kube-liveness-probes~1
  it("counts the pods' containers that have a livenessProbe, a Deployment's too; never the word in a comment, a value or a document that cannot be read", () => {
    const pod = (name: string, probe: string) =>
      `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\nspec:\n  containers:\n  - name: a\n    image: x\n${probe}  - name: b\n    image: x\n`;
    const probed = "    livenessProbe:\n      exec:\n        command: ['true']\n";
    const deployment =
      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: x\n        livenessProbe:\n          exec:\n            command: ['true']\n";
    expect(probedContainers(pod('p', probed))).to.equal(1);
    expect(probedContainers(`${pod('p', probed)}---\n${deployment}`)).to.equal(2);
    expect(probedContainers(`# livenessProbe: later\n${pod('p', '    env:\n    - name: X\n      value: livenessProbe\n')}`)).to.equal(0);
    expect(probedContainers('kind: Pod\nspec: [livenessProbe')).to.equal(0);
  });
});

describe('podman-kube: the bookkeeping volumes', () => {
  it('writes the data label in base64 without padding, as the released agent reads it, and reads both forms', () => {
    for (const text of ['a', 'ab', 'abc', 'manifest: |\n  kind: Pod\n']) {
      const label = toBase64(text);
      expect(label).to.not.match(/=/);
      expect(fromBase64(label)).to.equal(text);
      expect(fromBase64(Buffer.from(text).toString('base64'))).to.equal(text);
    }
    expect(toBase64('["pod-1"]')).to.equal('WyJwb2QtMSJd');
  });
});
