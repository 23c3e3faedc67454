import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parseManifest } from '../../lib/codec/manifest.js';
import { specsFor } from '../../lib/desired-state.js';
import { parseContainerConfig } from '../../lib/runtimes/containers/run-config.js';
import { parseKubeConfig } from '../../lib/runtimes/podman/kube-config.js';
import { parseUnitConfig } from '../../lib/runtimes/systemd/unit-config.js';

describe('examples/', () => {
  for (const file of readdirSync('examples').filter((f) => f.endsWith('.yaml'))) {
    it(`${file} is a valid manifest for agent_A with valid runtime configs`, () => {
      const specs = specsFor('agent_A', parseManifest(readFileSync(path.join('examples', file), 'utf8')));
      expect(specs).not.to.be.empty;
      const readers: Record<string, (config: string) => unknown> = { podman: parseContainerConfig, 'podman-kube': parseKubeConfig, systemd: parseUnitConfig };
      for (const s of specs) readers[s.runtime](s.runtimeConfig);
    });
  }
});
