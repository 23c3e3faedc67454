import { expect } from 'chai';
import { parseManifest } from '../../lib/codec/manifest.js';
import { ManifestError, checkCycles, deleteConditionsOf, diffFor, renderTemplate, specsFor } from '../../lib/desired-state.js';

const manifest = (workloads: string, extra = '') => `apiVersion: v1\n${extra}workloads:\n${workloads}`;
const rejects = (text: string) => {
  try {
    parseManifest(text);
  } catch (err) {
    expect(err).to.be.instanceOf(ManifestError);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

const dependencyExample = manifest(`
  logger:
    runtime: podman
    agent: agent_A
    dependencies:
      storage_provider: ADD_COND_RUNNING
    runtimeConfig: "image: logger"
  storage_provider:
    runtime: podman
    agent: agent_A
    dependencies:
      init_storage: ADD_COND_SUCCEEDED
    runtimeConfig: "image: storage"
  init_storage:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: init"
  error_handler:
    runtime: podman
    agent: agent_A
    dependencies:
      storage_provider: ADD_COND_FAILED
    runtimeConfig: "image: handler"
`);

describe('manifests (standalone mode)', () => {
  it('reads the Ankaios manifest format', () => {
    const state = parseManifest(
      manifest(`
  nginx:
    runtime: podman
    agent: agent_A
    restartPolicy: ALWAYS
    tags:
      owner: me
    dependencies:
      db: ADD_COND_RUNNING
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMask: ["desiredState.workloads.*.agent"]
        - type: LogRule
          workloadNames: ["ivi_*"]
    files:
      - mountPoint: /etc/a.conf
        data: "x = 1"
    runtimeConfig: |
      image: nginx
`),
    );
    const [spec] = specsFor('agent_A', state);
    expect(spec.instanceName.workloadName).to.equal('nginx');
    expect(spec.restartPolicy).to.equal('Always');
    expect(spec.dependencies).to.deep.equal({ db: 'Running' });
    expect(spec.tags).to.deep.equal({ owner: 'me' });
    expect(spec.controlInterfaceAccess.allowRules).to.deep.equal([
      { kind: 'state', operation: 'Read', filterMasks: ['desiredState.workloads.*.agent'] },
      { kind: 'log', workloadNames: ['ivi_*'] },
    ]);
    expect(spec.files).to.deep.equal([{ mountPoint: '/etc/a.conf', data: 'x = 1' }]);
  });

  // swdd~api-version-checks~1
  it('rejects a missing or unknown apiVersion; accepts v0.1 with a warning', () => {
    expect(rejects('workloads: {}')).to.equal("'apiVersion' is missing (this agent reads 'v1')");
    expect(rejects('apiVersion: v9\nworkloads: {}')).to.equal("unsupported apiVersion 'v9' (this agent reads 'v1')");
    const warnings: string[] = [];
    parseManifest('apiVersion: v0.1\nworkloads: {}', (w) => warnings.push(w));
    expect(warnings).to.deep.equal(["apiVersion 'v0.1' is deprecated; use 'v1'."]);
  });

  it('gives every bad input its own message', () => {
    expect(rejects('apiVersion: v1\nworkloads: [a]')).to.equal("'workloads' must be a mapping");
    expect(rejects('- a list')).to.equal('a manifest must be a YAML mapping with apiVersion and workloads');
    expect(rejects('apiVersion: v1\nworkloads: {a: {runtime: [x')).to.match(/^not valid YAML/);
    expect(rejects('apiVersion: v1\nworkload: {}')).to.equal("unknown top-level key 'workload' (apiVersion, workloads, configs)");
    expect(rejects(manifest('  a:\n    agent: x\n'))).to.equal("workload 'a': 'runtime' is missing");
    expect(rejects(manifest('  a:\n    runtime: podman\n    restartPolicy: SOMETIMES\n'))).to.equal(
      "workload 'a': unknown restartPolicy 'SOMETIMES' (NEVER, ON_FAILURE or ALWAYS)",
    );
    expect(rejects(manifest('  a:\n    runtime: podman\n    dependencies: {b: ADD_COND_MAYBE}\n'))).to.equal(
      "workload 'a': unknown condition 'ADD_COND_MAYBE' for dependency 'b'",
    );
    expect(rejects(manifest('  a:\n    runtime: podman\n    files: [{mountPoint: /x}]\n'))).to.equal(
      "workload 'a': the file '/x' needs either 'data' or 'binaryData'",
    );
  });

  // swdd~api-workload-naming-convention~1
  it('workload names have 1 to 63 letters, digits, - or _', () => {
    expect(rejects(manifest('  "bad.name":\n    runtime: podman\n'))).to.equal("workload 'bad.name': a workload name has 1 to 63 letters, digits, '-' or '_'");
    expect(rejects(manifest(`  ${'a'.repeat(64)}:\n    runtime: podman\n`))).to.match(/a workload name has 1 to 63/);
    expect(() => parseManifest(manifest(`  ${'a'.repeat(63)}:\n    runtime: podman\n`))).not.to.throw();
  });

  // swdd~api-agent-naming-convention~1
  it('agent names have letters, digits, - and _; empty means not scheduled', () => {
    expect(rejects(manifest('  a:\n    runtime: podman\n    agent: "agent A"\n'))).to.equal(
      "workload 'a': invalid agent name 'agent A' (letters, digits, '-' and '_')",
    );
    const state = parseManifest(manifest('  a:\n    runtime: podman\n    agent: ""\n'));
    expect(specsFor('', state).map((s) => s.instanceName.agentName)).to.deep.equal(['']);
  });

  // swdd~api-config-item-key-naming-convention~1, swdd~api-config-aliases-and-config-reference-keys-naming-convention~1
  it('config keys, aliases and references are checked', () => {
    expect(rejects('apiVersion: v1\nconfigs: {"bad key": x}\n')).to.equal("invalid config key 'bad key' (letters, digits, '-' and '_')");
    expect(rejects('apiVersion: v1\nconfigs: {ok: {"in ner": x}}\n')).to.equal("config 'ok': invalid config key 'in ner' (letters, digits, '-' and '_')");
    expect(rejects(manifest('  a:\n    runtime: podman\n    configs: {"al ias": port}\n', 'configs: {port: "80"}\n'))).to.equal(
      "workload 'a': invalid config reference 'al ias: port' (letters, digits, '-' and '_')",
    );
    expect(rejects(manifest('  a:\n    runtime: podman\n    configs: {p: nope}\n'))).to.equal(
      "workload 'a': refers to the config 'nope', which the manifest does not define",
    );
  });

  // swdd~api-access-rules-filter-mask-convention~1, swdd~api-access-rules-logs-workload-names-convention~1
  it('access rules are checked', () => {
    const rule = (r: string) => rejects(manifest(`  a:\n    runtime: podman\n    controlInterfaceAccess:\n      allowRules:\n        - ${r}\n`));
    expect(rule('{type: StateRule, operation: Read, filterMask: []}')).to.equal("workload 'a': a StateRule needs at least one filter mask");
    expect(rule('{type: StateRule, operation: Read, filterMask: ["desiredState..x"]}')).to.equal(
      "workload 'a': invalid filter mask 'desiredState..x' (dot-separated names or '*')",
    );
    expect(rule('{type: StateRule, operation: Peek, filterMask: [a]}')).to.match(/unknown operation 'Peek'/);
    expect(rule('{type: LogRule, workloadNames: ["a*b*"]}')).to.equal(
      "workload 'a': invalid workload name 'a*b*' in a LogRule (a workload name with at most one '*')",
    );
    expect(rule('{type: LogRule, workloadNames: ["a b"]}')).to.match(/invalid workload name 'a b'/);
    expect(rule('{type: Magic}')).to.equal("workload 'a': unknown access rule type 'Magic' (StateRule or LogRule)");
  });

  it('rejects dependency cycles, naming the cycle', () => {
    expect(
      rejects(
        manifest(`
  a:
    runtime: podman
    dependencies: {b: ADD_COND_RUNNING}
  b:
    runtime: podman
    dependencies: {c: ADD_COND_SUCCEEDED}
  c:
    runtime: podman
    dependencies: {a: ADD_COND_FAILED}
`),
      ),
    ).to.equal('the dependencies form a cycle: a -> b -> c -> a');
    expect(rejects(manifest('  self:\n    runtime: podman\n    dependencies: {self: ADD_COND_RUNNING}\n'))).to.equal(
      'the dependencies form a cycle: self -> self',
    );
    expect(() => checkCycles(parseManifest(dependencyExample))).not.to.throw();
  });

  it('allows dependencies on workloads that do not exist (yet)', () => {
    expect(() => parseManifest(manifest('  a:\n    runtime: podman\n    dependencies: {ghost: ADD_COND_RUNNING}\n'))).not.to.throw();
  });

  it('renders {{…}} templates in runtimeConfig and agent from the configs, and hashes the rendered config', () => {
    const state = parseManifest(
      manifest(
        `
  web:
    runtime: podman
    agent: "{{where.agent}}"
    configs:
      port: web_port
      where: placement
      list: ports
    runtimeConfig: |
      image: nginx
      commandOptions: ["-p", "{{port}}:80", "-p", "{{list.1}}:81"]
`,
        'configs:\n  web_port: 8081\n  placement: {agent: agent_A}\n  ports: ["1", "2"]\n',
      ),
    );
    const [spec] = specsFor('agent_A', state);
    expect(spec.runtimeConfig).to.equal('image: nginx\ncommandOptions: ["-p", "8081:80", "-p", "2:81"]\n');
    expect(spec.instanceName.id).to.have.length(64);
    expect(() => renderTemplate('{{#each x}}{{/each}}', {}, 'w')).to.throw(ManifestError, /not supported/);
    expect(rejects(manifest('  a:\n    runtime: podman\n    runtimeConfig: "{{missing}}"\n'))).to.equal(
      "workload 'a': the template '{{missing}}' does not name a config value",
    );
  });

  it('template expansion is bounded: a manifest whose templates render to more than 1 MiB is refused', () => {
    const big = 'x'.repeat(600 * 1024);
    expect(rejects(manifest('  a:\n    runtime: podman\n    configs: {b: big}\n    runtimeConfig: "{{b}}{{b}}"\n', `configs:\n  big: "${big}"\n`))).to.equal(
      "workload 'a': the templates render to more than 1 MiB",
    );
    expect(() =>
      parseManifest(manifest('  a:\n    runtime: podman\n    configs: {b: big}\n    runtimeConfig: "{{b}}"\n', `configs:\n  big: "${big}"\n`)),
    ).not.to.throw();
  });

  it('adds the implicit delete conditions: dependents with ADD_COND_RUNNING wait to be neither pending nor running', () => {
    const state = parseManifest(dependencyExample);
    expect(deleteConditionsOf('storage_provider', state)).to.deep.equal({ logger: 'NotPendingNorRunning' });
    expect(deleteConditionsOf('init_storage', state), 'succeeded and failed set none').to.deep.equal({});
  });

  it('diffs two desired states for one agent: added, deleted (with delete conditions) and changed', () => {
    const before = parseManifest(dependencyExample);
    const after = parseManifest(
      dependencyExample
        .replace('runtimeConfig: "image: storage"', 'runtimeConfig: "image: storage:2"')
        .replace(/\n {2}error_handler:[\s\S]*$/, '\n  extra:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: "image: extra"\n'),
    );
    const { added, deleted } = diffFor('agent_A', before, after);
    expect(added.map((s) => s.instanceName.workloadName).sort()).to.deep.equal(['extra', 'storage_provider']);
    expect(deleted.map((d) => [d.instanceName.workloadName, d.dependencies])).to.deep.equal([
      ['storage_provider', { logger: 'NotPendingNorRunning' }],
      ['error_handler', {}],
    ]);
    expect(diffFor('agent_A', before, before)).to.deep.equal({ added: [], deleted: [] });
    expect(diffFor('agent_B', before, after)).to.deep.equal({ added: [], deleted: [] });
  });
});
