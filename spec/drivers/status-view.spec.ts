import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { statusView } from '../../lib/drivers/standalone.js';
import { silentLogger } from '../../lib/logger.js';
import { parseManifest } from '../../lib/codec/manifest.js';

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
