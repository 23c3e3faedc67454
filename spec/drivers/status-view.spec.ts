import { EventEmitter } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { firstValueFrom, take, toArray } from 'rxjs';
import { readManifest, statusView, watchManifest } from '../../lib/drivers/standalone.js';
import { silentLogger } from '../../lib/logger.js';
import { parseManifest } from '../../lib/codec/manifest.js';
import { specFolder } from '../../scripts/harness/temp.js';

describe('the status view of standalone mode', () => {
  it('on a terminal, draws the table when it changes, and again when the terminal is resized', async () => {
    const drawn: string[] = [];
    const terminal = Object.assign(new EventEmitter(), { isTTY: true, write: (text: string) => drawn.push(text) }) as unknown as NodeJS.WriteStream;
    const desired = parseManifest('apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n');
    const view = statusView('agent_A', terminal, silentLogger);
    view({ desired, states: new Map() });
    await new Promise((r) => setTimeout(r, 150));
    view({ desired, states: new Map() });
    await new Promise((r) => setTimeout(r, 150));
    expect(drawn, 'the same table is not drawn twice').to.have.length(1);
    terminal.emit('resize');
    await new Promise((r) => setTimeout(r, 150));
    expect(drawn).to.have.length(2);
    expect(drawn[1]).to.equal(drawn[0]);
    expect(drawn[1]).to.match(/web\s+agent_A\s+podman\s+Pending\(Initial\)/);
  });
});

describe('following the manifest of standalone mode', () => {
  it('a change made between the first read and the start of the watch is still applied', async () => {
    const folder = specFolder('ank-manifest-');
    try {
      const file = path.join(folder, 'manifest.yaml');
      const workload = (name: string) => `  ${name}:\n    runtime: podman\n    agent: agent_A\n`;
      writeFileSync(file, `apiVersion: v1\nworkloads:\n${workload('first')}`);
      const first = readManifest(file, silentLogger);
      writeFileSync(file, `apiVersion: v1\nworkloads:\n${workload('first')}${workload('second')}`);
      const states = await firstValueFrom(watchManifest(file, first, silentLogger).pipe(take(2), toArray()));
      expect(states.map((s) => [...s.workloads.keys()])).to.deep.equal([['first'], ['first', 'second']]);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
