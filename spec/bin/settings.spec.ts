// Settings declared by their modules: the agent config's keys a runtime module reads live in its folder
// (settings.ts), lib/config.ts checks a file against every declaration, and each module gets its own value.
import { expect } from 'chai';
import { RUNTIME_SETTINGS } from '../../bin/settings.js';
import { RUNTIME_MODULES, makeRuntimes } from '../../bin/wiring.js';
import { ConfigError, type Declared, parseConfigFile, resolveConfig } from '../../lib/config.js';
import { silentLogger } from '../../lib/logger.js';
import type { RuntimeModule } from '../../lib/runtimes/base/module.js';
import { FakeRuntime } from '../../scripts/harness/fake-runtime.js';
import { harnessProcesses } from '../../scripts/harness/processes.js';

/** A runtime of the spec's own, with a setting of its own: `toy_speed`, 1 unless the config says, or TOY_BOOST in the environment. */
interface ToySettings {
  readonly speed: number;
}
const toySettings: Declared<ToySettings> = {
  keys: { toy_speed: { type: 'a number from 1 to 10', is: (v) => typeof v === 'number' && v >= 1 && v <= 10 } },
  parse: (given, env) => ({ speed: ((given.toy_speed as number | undefined) ?? 1) * (env.TOY_BOOST === 'on' ? 2 : 1) }),
};
const toyModule = (heard: ToySettings[]): RuntimeModule<ToySettings> => ({
  names: ['toy'],
  settings: toySettings,
  make(_context, own) {
    heard.push(own);
    return { connectors: new Map([['toy', new FakeRuntime({}, 'toy')]]) };
  },
});

describe('settings declared by their runtime modules', () => {
  it("the start checks a config against each module's declaration, the one the module list makes it with", () => {
    const declared = RUNTIME_MODULES.flatMap((m) => (m.settings ? [[m.names[0], m.settings] as const] : []));
    // Functions compare by identity: the very declarations.
    expect([...RUNTIME_SETTINGS]).to.deep.equal(declared);
  });

  it('a runtime added with a setting of its own gets it from the config file and the environment, with nothing of lib/config.ts changed', () => {
    const declarations = new Map([...RUNTIME_SETTINGS, ['toy', toySettings as Declared]]);
    const warnings: string[] = [];
    const file = parseConfigFile("version = 'v1'\ntoy_speed = 3\n", 'toy.toml', (w) => warnings.push(w), declarations);
    const config = resolveConfig({ name: 'a', insecure: true }, { TOY_BOOST: 'on' }, file, undefined, declarations);
    expect(warnings, 'its key is known').to.deep.equal([]);
    expect(config.moduleSettings.get('toy')).to.deep.equal({ speed: 6 });
    const heard: ToySettings[] = [];
    const made = makeRuntimes(silentLogger, { processes: harnessProcesses(), modules: [toyModule(heard)], settings: config.moduleSettings });
    made.dispose();
    expect(heard).to.deep.equal([{ speed: 6 }]);
    expect([...made.connectors.keys()]).to.deep.equal(['toy']);
  });

  it("a module's key of the wrong type is refused in the module's words; without its declaration the key is only warned about", () => {
    const declarations = new Map([['toy', toySettings as Declared]]);
    expect(() => parseConfigFile("version = 'v1'\ntoy_speed = 11\n", 'toy.toml', undefined, declarations)).to.throw(
      ConfigError,
      "The key 'toy_speed' in the agent config 'toy.toml' must be a number from 1 to 10.",
    );
    const warnings: string[] = [];
    parseConfigFile("version = 'v1'\ntoy_speed = 3\n", 'toy.toml', (w) => warnings.push(w));
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/^Unknown key 'toy_speed' in the agent config 'toy.toml' is ignored/);
  });

  it('a module made without settings given has those of an empty config', () => {
    const heard: ToySettings[] = [];
    makeRuntimes(silentLogger, { processes: harnessProcesses(), modules: [toyModule(heard)] }).dispose();
    expect(heard).to.deep.equal([{ speed: 1 }]);
  });

  it('lib/config.ts names no runtime', async () => {
    const { readFileSync } = await import('node:fs');
    const text = readFileSync(new URL('../../lib/config.ts', import.meta.url), 'utf8');
    expect(text.match(/podman|containerd|systemd|nerdctl/gi) ?? []).to.deep.equal([]);
  });
});
