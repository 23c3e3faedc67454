// The libpod API's requests (lib/runtimes/podman/libpod.ts) against a socket that answers as a broken service
// would: every way an answer can end settles the call, never later than its deadline.
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { AnswerCut, Libpod, RouteLost, ping } from '../../lib/runtimes/podman/libpod.js';
import { specFolder } from '../../scripts/harness/temp.js';

type Answer = 'whole' | 'cut' | 'stalled' | 'reset before the answer';

/** A socket that answers pings whole and every other request as `answer()` says. */
async function brokenService(answer: () => Answer) {
  const socket = path.join(specFolder('ank-libpod-'), 'api.sock');
  const server = net.createServer((connection) => {
    connection.on('error', () => undefined);
    connection.on('data', (chunk) => {
      const head = chunk.toString('latin1');
      const body = head.includes('/_ping') ? 'OK' : JSON.stringify([{ Id: 'a'.repeat(64), State: 'running' }]);
      const whole = `HTTP/1.1 200 OK\r\nLibpod-Api-Version: 4.3.1\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      const kind = head.includes('/_ping') ? 'whole' : answer();
      if (kind === 'whole') connection.write(whole);
      else if (kind === 'reset before the answer') connection.destroy();
      else {
        connection.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
        if (kind === 'cut') connection.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return { socket, close: () => server.close() };
}

/** How the call ended and after how many ms. */
async function outcome(call: Promise<unknown>): Promise<{ error?: Error; ms: number }> {
  const started = performance.now();
  try {
    await call;
    return { ms: performance.now() - started };
  } catch (error) {
    return { error: error as Error, ms: performance.now() - started };
  }
}

describe('libpod requests (a socket that answers as a broken service)', () => {
  // rx~podman-service-fallback~1
  it('an answer cut after its headers fails at once as a cut answer, while the pings pass and the next whole answer is read', async () => {
    let next: Answer = 'cut';
    const service = await brokenService(() => next);
    const api = new Libpod(service.socket);
    try {
      const cut = await outcome(api.containers([], 5000));
      expect(cut.error).to.be.instanceOf(AnswerCut);
      expect(cut.ms, 'settled long before the deadline').to.be.below(1000);
      expect(await ping(service.socket, 1000), 'the ping of the same service').to.equal(true);
      next = 'whole';
      expect((await api.containers([], 5000)).map((row) => row.State)).to.deep.equal(['running']);
    } finally {
      api.dispose();
      service.close();
    }
  });

  // rx~podman-service-fallback~1
  it('an answer that stops after its headers fails at its deadline, which covers the body', async () => {
    const service = await brokenService(() => 'stalled');
    const api = new Libpod(service.socket);
    try {
      const stalled = await outcome(api.act('remove', 'x', 300));
      expect(stalled.error).to.be.instanceOf(RouteLost).and.not.instanceOf(AnswerCut);
      expect(stalled.error?.message).to.equal('no answer within 0.3 s');
      expect(stalled.ms).to.be.within(290, 1000);
    } finally {
      api.dispose();
      service.close();
    }
  });

  // rx~podman-service-fallback~1
  it('a connection closed before any answer fails as a lost way, not as a cut answer', async () => {
    const service = await brokenService(() => 'reset before the answer');
    const api = new Libpod(service.socket);
    try {
      const reset = await outcome(api.figures(5000));
      expect(reset.error).to.be.instanceOf(RouteLost).and.not.instanceOf(AnswerCut);
      expect(reset.ms).to.be.below(1000);
    } finally {
      api.dispose();
      service.close();
    }
  });
});
