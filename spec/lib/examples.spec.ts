import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parseManifest } from '../../lib/codec/manifest.js';
import { specsFor } from '../../lib/desired-state.js';
import { parseContainerConfig } from '../../lib/runtimes/base/run-config.js';
import { parseKubeConfig } from '../../lib/runtimes/podman/kube-config.js';

describe('examples/', () => {
  for (const file of readdirSync('examples').filter((f) => f.endsWith('.yaml'))) {
    it(`${file} is a valid manifest for agent_A with valid runtime configs`, () => {
      const specs = specsFor('agent_A', parseManifest(readFileSync(path.join('examples', file), 'utf8')));
      expect(specs).not.to.be.empty;
      for (const s of specs) (s.runtime === 'podman' ? parseContainerConfig : parseKubeConfig)(s.runtimeConfig);
    });
  }
});
