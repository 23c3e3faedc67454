// The set-up of the end-to-end specs: a loopback server, the real agent process against it, and the
// clean-up of both and of the agent's containers after each test.
import { type ChildProcess, spawn } from 'node:child_process';
import { BIN } from '../../scripts/harness/agent.js';
import { FakeAnkaiosServer } from '../../scripts/harness/fake-server.js';
import { cleanup, requirePodman, uniqueAgent } from '../../scripts/harness/podman.js';
import { specFolder } from '../../scripts/harness/temp.js';

export interface EndToEnd {
  readonly agentName: string;
  /** The run folder the agent is started with unless a test gives another. */
  readonly run: string;
  server: FakeAnkaiosServer;
  agent?: ChildProcess;
  /** Starts the agent against the server (it is killed after the test). */
  start(options?: { run?: string; args?: readonly string[]; stderr?: boolean }): ChildProcess;
}

/** Registers the hooks of a describe block of end-to-end tests; the context is filled in per test. */
export function endToEnd(prefix: string): EndToEnd {
  const ctx: EndToEnd = {
    agentName: uniqueAgent(prefix),
    run: specFolder(`ank-${prefix}-`),
    server: undefined as unknown as FakeAnkaiosServer,
    start: ({ run = ctx.run, args = [], stderr = false } = {}) =>
      (ctx.agent = spawn(process.execPath, [BIN, '-n', ctx.agentName, '-s', ctx.server.url, '-k', '-r', run, ...args], {
        stdio: ['ignore', 'ignore', stderr ? 'inherit' : 'ignore'],
      })),
  };
  before(requirePodman);
  beforeEach(async () => (ctx.server = await FakeAnkaiosServer.start()));
  afterEach(() => {
    ctx.agent?.kill('SIGKILL');
    ctx.agent = undefined;
    ctx.server.stop();
    cleanup(ctx.agentName);
  });
  return ctx;
}
