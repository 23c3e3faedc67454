// Requests on a Unix socket (lib/drivers/unix-http.ts) against a socket that answers as the test says: each
// framing an HTTP/1.1 answer may have, bytes as they come, answers out of bounds, and the kept connections.
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { AnswerCut, RouteLost, UnixHttp, oneShot } from '../../lib/drivers/unix-http.js';
import { specFolder } from '../../scripts/harness/temp.js';

/** A socket that answers each request with the pieces `answer` gives, written one at a time ('close' ends the connection); it counts its connections. */
async function service(answer: (request: string) => readonly string[] | 'close') {
  const socket = path.join(specFolder('ank-unix-http-'), 'api.sock');
  const stats = { connections: 0 };
  const open = new Set<net.Socket>();
  const server = net.createServer((connection) => {
    stats.connections++;
    open.add(connection);
    connection.on('close', () => open.delete(connection));
    connection.on('error', () => undefined);
    connection.on('data', async (chunk) => {
      const pieces = answer(chunk.toString('latin1'));
      if (pieces === 'close') return connection.destroy();
      for (const piece of pieces) {
        if (piece === 'close') return connection.end();
        connection.write(Buffer.from(piece, 'latin1'));
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    stats,
    /** Closes every connection the service holds, as a service that went idle does. */
    hangUp: () => {
      for (const connection of open) connection.destroy();
    },
    close: () => {
      for (const connection of open) connection.destroy();
      server.close();
    },
  };
}

const pool = (socket: string, maxConnections = 8) => new UnixHttp(socket, { maxConnections, idleMs: 1000, maxAnswerBytes: 1000 });

async function failure(call: Promise<unknown>): Promise<Error> {
  try {
    await call;
  } catch (err) {
    return err as Error;
  }
  throw new Error('the call did not fail');
}

describe('HTTP requests on a Unix socket', () => {
  // rx~podman-service~1
  it('reads a body framed by its length, a byte at a time, and keeps the connection for the next request', async () => {
    const body = '{"Id":"äbc"}';
    const whole = `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const api = await service(() => [...Buffer.from(whole)].map((b) => String.fromCharCode(b)));
    const http = pool(api.socket);
    try {
      const first = await http.request('GET', '/a', 5000);
      expect(first).to.include({ status: 200, body });
      expect(first.headers.get('content-length')).to.equal(String(Buffer.byteLength(body)));
      expect((await http.request('GET', '/b', 5000)).body).to.equal(body);
      expect(api.stats.connections, 'one connection for both').to.equal(1);
    } finally {
      http.dispose();
      api.close();
    }
  });

  // rx~podman-service~1
  it('reads a chunked body with extensions and trailers, split anywhere', async () => {
    const api = await service(() => [
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhel',
      'lo\r',
      '\n6\r\n world\r\n0\r\nX-Trailer: y\r\n',
      '\r\n',
    ]);
    const http = pool(api.socket);
    try {
      expect((await http.request('GET', '/', 5000)).body).to.equal('hello world');
      expect((await http.request('GET', '/', 5000)).body, 'the connection carries the next answer').to.equal('hello world');
      expect(api.stats.connections).to.equal(1);
    } finally {
      http.dispose();
      api.close();
    }
  });

  // rx~podman-service~1
  it('reads a body framed by the close, and a 204 without a body, and keeps no connection that is to close', async () => {
    const api = await service((request) =>
      request.startsWith('GET /close') ? ['HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end', 'close'] : ['HTTP/1.1 204 No Content\r\n\r\n'],
    );
    const http = pool(api.socket);
    try {
      expect((await http.request('GET', '/none', 5000)).status).to.equal(204);
      expect(await http.request('GET', '/close', 5000)).to.include({ status: 200, body: 'until the end' });
      expect((await http.request('GET', '/none', 5000)).status).to.equal(204);
      expect(api.stats.connections, 'a new connection after the closed one').to.equal(2);
    } finally {
      http.dispose();
      api.close();
    }
  });

  // rx~podman-service-fallback~1
  it('fails an answer that is not HTTP, larger than allowed, or with a head, chunk line or trailers out of bounds, as a lost way', async () => {
    const answers: Record<string, readonly string[]> = {
      '/not-http': ['SSH-2.0-OpenSSH\r\n\r\n'],
      '/large': ['HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n'],
      '/large-chunks': ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', ...Array.from({ length: 11 }, () => `64\r\n${'x'.repeat(100)}\r\n`)],
      '/head': ['HTTP/1.1 200 OK\r\n', ...Array.from({ length: 70 }, () => `X: ${'y'.repeat(1000)}\r\n`)],
      '/size-line': ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', '1'.repeat(2000)],
      '/bad-size': ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
      '/head-by-bytes': ['HTTP/1.1 200 OK\r\n', ...Array.from({ length: 700 }, () => `X: ${'y'.repeat(95)}\r\n`)],
      '/endless-trailers': ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n', ...Array.from({ length: 20 }, () => 'X: y\r\n'.repeat(1000))],
    };
    const api = await service((request) => answers[request.split(' ')[1]]);
    const http = pool(api.socket);
    try {
      for (const url of Object.keys(answers)) {
        const err = await failure(http.request('GET', url, 5000));
        expect(err, url).to.be.instanceOf(RouteLost);
      }
      expect((await failure(http.request('GET', '/large', 5000))).message).to.equal('an answer of more than 1000 bytes');
    } finally {
      http.dispose();
      api.close();
    }
  });

  // rx~podman-service-fallback~1
  it('replaces once a kept connection the service closed while it was idle, and fails a fresh one closed before any answer', async () => {
    let hangUps = 0;
    const api = await service(() => (hangUps > 0 ? ['HTTP/1.1 204 No Content\r\n\r\n'] : 'close'));
    const http = pool(api.socket);
    try {
      const err = await failure(http.request('GET', '/', 5000));
      expect(err).to.be.instanceOf(RouteLost).and.not.instanceOf(AnswerCut);
      hangUps++;
      expect((await http.request('GET', '/', 5000)).status).to.equal(204);
      const before = api.stats.connections;
      // The service closes the kept connection without the agent seeing it first: the next request finds it gone.
      api.hangUp();
      expect((await http.request('GET', '/', 5000)).status).to.equal(204);
      expect(api.stats.connections - before, 'one new connection').to.equal(1);
    } finally {
      http.dispose();
      api.close();
    }
  });

  // rx~podman-service-fallback~1
  it('holds to its most connections, and a request waiting for one fails at its deadline', async () => {
    let stall = true;
    const api = await service(() => (stall ? [] : ['HTTP/1.1 204 No Content\r\n\r\n']));
    const http = pool(api.socket, 2);
    try {
      const stalled = [http.request('GET', '/', 400), http.request('GET', '/', 400)].map((call) => failure(call));
      const started = performance.now();
      const waited = await failure(http.request('GET', '/', 200));
      expect(waited.message).to.equal('no answer within 0.2 s');
      expect(performance.now() - started).to.be.within(180, 390);
      for (const err of await Promise.all(stalled)) expect(err.message).to.equal('no answer within 0.4 s');
      stall = false;
      const answers = await Promise.all(Array.from({ length: 6 }, () => http.request('GET', '/', 5000)));
      expect(answers.map((a) => a.status)).to.deep.equal(Array(6).fill(204));
      expect(api.stats.connections, 'two stalled, then at most two more').to.be.at.most(4);
    } finally {
      http.dispose();
      api.close();
    }
  });

  // rx~podman-service~1
  it('asks once on a connection of its own and closes it', async () => {
    const api = await service(() => ['HTTP/1.1 200 OK\r\nLibpod-Api-Version: 4.3.1\r\nContent-Length: 2\r\n\r\nOK']);
    try {
      const answer = await oneShot(api.socket, 'GET', '/_ping', 5000);
      expect(answer.headers.get('libpod-api-version')).to.equal('4.3.1');
      expect(answer.body).to.equal('OK');
    } finally {
      api.close();
    }
  });
});
