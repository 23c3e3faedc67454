// The agent as shipped says hello before it loads what the hello does not need: told by the order of what it
// does, not by a timing. A preloaded hook makes the process stop for good at its first load of
// `child_process` (the runtimes' module, which no part of the hello needs); the server still hears the hello.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { BIN } from '../../scripts/harness/agent.js';
import { FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { specFolder } from '../../scripts/harness/temp.js';

const tmp = specFolder('ank-start-');
const run = path.join(tmp, 'run');
mkdirSync(run);
const stuckAt = path.join(tmp, 'stuck-at-child-process.cjs');
writeFileSync(
  stuckAt,
  `const Module = require('node:module');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'node:child_process' || request === 'child_process') {
    process.stderr.write('loading child_process\\n');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
  return load.call(this, request, ...rest);
};
`,
);

describe('the start of the agent as shipped', function () {
  this.timeout(30_000);
  let server: FakeAnkaiosServer;
  let agent: ChildProcess | undefined;
  beforeEach(async () => (server = await FakeAnkaiosServer.start()));
  afterEach(() => {
    agent?.kill('SIGKILL');
    server.stop();
  });

  // swdd~agent-sends-hello~1
  it('sends its hello before it loads the runtimes: stopped for good at that load, it has said hello', async () => {
    agent = spawn(BIN, ['-n', 'hello_first', '-s', server.url, '-k', '-r', run, '-t', 'zone=front'], {
      env: { ...process.env, NODE_OPTIONS: `--require=${stuckAt}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let said = '';
    agent.stderr!.on('data', (d: Buffer) => (said += d.toString()));
    const stream = await server.nextStream();
    const first = await stream.waitFor(() => true);
    expect(first.ToServerEnum.case).to.equal('agentHello');
    if (first.ToServerEnum.case !== 'agentHello') return;
    expect(first.ToServerEnum.value.agentName).to.equal('hello_first');
    expect(first.ToServerEnum.value.protocolVersion).to.equal('1.0.1');
    expect(first.ToServerEnum.value.tags?.tags).to.deep.equal({ zone: 'front' });
    // It did go on to load the rest, and is held there: the order, not a race.
    for (let waited = 0; !said.includes('loading child_process') && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    expect(said).to.match(/info {2}Agent 'hello_first' connecting to http:\/\/127\.0\.0\.1:\d+ \(insecure\)\.\nloading child_process\n/);
  });
});
