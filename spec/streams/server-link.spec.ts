import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { ReplaySubject, Subject, type Subscription, filter, firstValueFrom, take, toArray } from 'rxjs';
import { type Security, connectAgent } from '../../lib/drivers/grpc-connection.js';
import { ExecutionState } from '../../lib/execution-state.js';
import { type Logger, silentLogger } from '../../lib/logger.js';
import { until } from '../../scripts/harness/wait.js';
import type { FromServer, ToServer } from '../../lib/messages.js';
import { LINE_1 } from '../../lib/codec/lines.js';
import { ServerRefused, serverLink } from '../../streams/server-link.js';
import { FakeAnkaiosServer, addedWorkload } from '../../scripts/harness/fake-server.js';
import { AGENT, stateOf, workload } from '../../scripts/harness/fixtures.js';
import { specFolder } from '../../scripts/harness/temp.js';

const insecure: Security = { insecure: true };

/** Runs the link against `url`; what it emits is replayed in `in$`. */
function link(url: string, options: { security?: Security; stop$?: Subject<void>; log?: Logger } = {}) {
  const out$ = new Subject<ToServer>();
  const in$ = new ReplaySubject<FromServer>();
  const errors: unknown[] = [];
  /** The lines of each connection the server accepted. */
  const connected: string[][] = [];
  let completed = false;
  const subscription = serverLink(
    (o$) => connectAgent({ serverUrl: url, security: options.security ?? insecure, keepaliveMs: 2000, keepaliveTimeoutMs: 2000 }, o$),
    out$,
    {
      agentName: AGENT,
      log: options.log ?? silentLogger,
      stop$: options.stop$,
    },
  ).subscribe({
    next: (m) => (m.kind === 'connected' ? connected.push(m.lines.map((l) => l.name)) : m.kind !== 'disconnected' && in$.next(m)),
    error: (e) => errors.push(e),
    complete: () => (completed = true),
  });
  return { out$, in$, errors, subscription, completed: () => completed, connected };
}

/**
 * A TCP server that speaks just enough HTTP/2 to take a call (its settings, acknowledged) and records the frames
 * the client sends: their type and whether they end their stream. Node's own server cannot tell a half-close
 * from a dropped connection; a released server does.
 */
async function frameRecorder() {
  const TYPES = ['DATA', 'HEADERS', 'PRIORITY', 'RST_STREAM', 'SETTINGS', 'PUSH_PROMISE', 'PING', 'GOAWAY', 'WINDOW_UPDATE', 'CONTINUATION'];
  const frames: { type: string; endStream: boolean }[] = [];
  let closed = false;
  const tcp = net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let preface = false;
    socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!preface) {
        if (buffered.length < 24) return;
        buffered = buffered.subarray(24);
        preface = true;
      }
      while (buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
        const [type, flags] = [buffered[3], buffered[4]];
        frames.push({ type: TYPES[type] ?? String(type), endStream: (type === 0 || type === 1) && (flags & 1) === 1 });
        if (type === 4 && (flags & 1) === 0) socket.write(Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]));
        buffered = buffered.subarray(9 + buffered.readUIntBE(0, 3));
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => (closed = true));
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(tcp.address() as net.AddressInfo).port}`, frames, closed: () => closed, close: () => tcp.close() };
}

describe('serverLink with the gRPC driver (real server on loopback)', () => {
  let server: FakeAnkaiosServer;
  const subscriptions: Subscription[] = [];
  beforeEach(async () => (server = await FakeAnkaiosServer.start()));
  afterEach(() => {
    subscriptions.splice(0).forEach((s) => s.unsubscribe());
    server.stop();
  });
  const open = (options?: Parameters<typeof link>[1], url = server.url) => {
    const l = link(url, options);
    subscriptions.push(l.subscription);
    return l;
  };

  // swdd~agent-sends-hello~1
  it('sends AgentHello with the agent name and protocol version first', async () => {
    open();
    const stream = await server.nextStream();
    const first = await stream.waitFor(() => true);
    expect(first.ToServerEnum).to.deep.include({ case: 'agentHello' });
    expect(first.ToServerEnum.value).to.deep.include({ agentName: AGENT, protocolVersion: LINE_1.version });
  });

  // swdd~agent-manager-listens-requests-from-server~1
  it('ServerHello, UpdateWorkload and UpdateWorkloadState arrive as typed values', async () => {
    const l = open();
    const stream = await server.nextStream();
    const wl = workload('nginx', { runtime: 'podman' });
    const added = {
      instanceName: wl.instanceName,
      workload: { runtime: 'podman', runtimeConfig: wl.runtimeConfig, restartPolicy: 2, dependencies: { dependencies: { db: 1 } } },
    };
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [added] } } });
    stream.send({
      FromServerEnum: {
        case: 'updateWorkload',
        value: { addedWorkloads: [], deletedWorkloads: [{ instanceName: wl.instanceName, dependencies: { logger: 1 } }] },
      },
    });
    stream.send({
      FromServerEnum: {
        case: 'updateWorkloadState',
        value: {
          workloadStates: [
            { instanceName: { ...wl.instanceName, agentName: 'agent_B' }, executionState: { ExecutionStateEnum: { case: 'running', value: 0 } } },
          ],
        },
      },
    });
    const messages: FromServer[] = [];
    await firstValueFrom(l.in$.pipe(filter((m) => messages.push(m) === 3)));
    expect(messages[0]).to.deep.equal({
      kind: 'serverHello',
      added: [{ ...wl, runtime: 'podman', restartPolicy: 'Always', dependencies: { db: 'Succeeded' } }],
    });
    expect(messages[1]).to.deep.equal({
      kind: 'updateWorkload',
      added: [],
      deleted: [{ instanceName: wl.instanceName, dependencies: { logger: 'NotPendingNorRunning' } }],
    });
    expect(messages[2]).to.deep.equal({
      kind: 'updateWorkloadState',
      states: [{ instanceName: { ...wl.instanceName, agentName: 'agent_B' }, executionState: ExecutionState.running() }],
    });
  });

  // swdd~agent-sends-workload-states-of-its-workloads-to-server~2
  it('outbound states reach the server as UpdateWorkloadState', async () => {
    const l = open();
    const stream = await server.nextStream();
    await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    l.out$.next({ kind: 'updateWorkloadState', states: [stateOf(workload('nginx'), ExecutionState.starting('Triggered at runtime.'))] });
    const m = await stream.waitFor((x) => x.ToServerEnum.case === 'updateWorkloadState');
    const states = m.ToServerEnum.case === 'updateWorkloadState' ? m.ToServerEnum.value.workloadStates : [];
    expect(states).to.have.length(1);
    expect(states[0].instanceName?.workloadName).to.equal('nginx');
    expect(states[0].executionState?.ExecutionStateEnum).to.deep.include({ case: 'pending', value: 2 });
    expect(states[0].executionState?.additionalInfo).to.equal('Triggered at runtime.');
  });

  // swdd~agent-handles-update-workload-state-requests~1, swdd~agent-manager-stores-all-workload-states~1
  it('leaves out a malformed element alone, never the message it came in; states of workloads no agent runs (empty agent name) are valid', async () => {
    const l = open();
    const stream = await server.nextStream();
    const good = workload('good', { runtime: 'podman' });
    stream.send({ FromServerEnum: { case: 'updateWorkload', value: { addedWorkloads: [{ workload: { runtime: 'podman' } }, addedWorkload(good)] } } });
    const notScheduled = {
      instanceName: { workloadName: 'idle', agentName: '', id: 'x' },
      executionState: { additionalInfo: '', ExecutionStateEnum: { case: 'notScheduled' as const, value: 0 } },
    };
    const broken = {
      instanceName: { workloadName: '', agentName: 'agent_B', id: 'y' },
      executionState: { additionalInfo: '', ExecutionStateEnum: { case: 'running' as const, value: 0 } },
    };
    const unknownSubstate = {
      instanceName: { workloadName: 'odd', agentName: 'agent_B', id: 'z' },
      executionState: { additionalInfo: '', ExecutionStateEnum: { case: 'running' as const, value: 77 } },
    };
    stream.send({ FromServerEnum: { case: 'updateWorkloadState', value: { workloadStates: [notScheduled, broken, unknownSubstate] } } });
    const [update, states] = await firstValueFrom(l.in$.pipe(take(2), toArray()));
    expect(update).to.deep.include({ kind: 'updateWorkload', deleted: [] });
    expect((update as Extract<FromServer, { kind: 'updateWorkload' }>).added.map((s) => s.instanceName.workloadName)).to.deep.equal(['good']);
    expect(states).to.deep.equal({
      kind: 'updateWorkloadState',
      states: [{ instanceName: { workloadName: 'idle', agentName: '', id: 'x' }, executionState: ExecutionState.notScheduled() }],
    });
  });

  it('reconnects after the server goes away and comes back, says hello again and sends what the agent says next', async () => {
    const l = open();
    const first = await server.nextStream();
    await first.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    server.stop();
    await server.listen();
    const second = await server.nextStream(10_000, 1);
    const hello = await second.waitFor(() => true);
    expect(hello.ToServerEnum.case).to.equal('agentHello');
    l.out$.next({ kind: 'updateWorkloadState', states: [stateOf(workload('nginx'), ExecutionState.running())] });
    await second.waitFor((m) => m.ToServerEnum.case === 'updateWorkloadState');
  });

  // swdd~grpc-agent-connection-sends-agent-gone~1
  it('when stopped, cancels the stream (the server sees it fail, no Goodbye) and stops reconnecting', async () => {
    const stop$ = new Subject<void>();
    const l = open({ stop$ });
    const stream = await server.nextStream();
    await stream.waitFor((m) => m.ToServerEnum.case === 'agentHello');
    stop$.next();
    await stream.waitForEnd();
    expect(stream.endedBy).to.equal('failure');
    expect(stream.received.map((m) => m.ToServerEnum.case)).to.not.include('goodbye');
    await new Promise((r) => setTimeout(r, 1500));
    expect(server.streams).to.have.length(1);
    expect(l.completed()).to.equal(true);
  });

  // swdd~grpc-agent-connection-sends-agent-gone~1
  it('stopping, or the end of what the agent sends, drops the connection without a half-close or a GOAWAY, as a released server needs', async () => {
    for (const how of ['unsubscribed', 'outbound completed'] as const) {
      const server = await frameRecorder();
      const out$ = new Subject<Uint8Array>();
      const subscription = connectAgent({ serverUrl: server.url, security: insecure }, out$).subscribe({ error: () => undefined });
      try {
        out$.next(new Uint8Array([8, 1]));
        await until(() => server.frames.some((f) => f.type === 'DATA'), 'the first message at the server');
        if (how === 'unsubscribed') subscription.unsubscribe();
        else out$.complete();
        await until(() => server.closed(), 'the connection closed');
        const last = server.frames.filter((f) => f.type !== 'SETTINGS' && f.type !== 'WINDOW_UPDATE' && f.type !== 'PING');
        expect(
          last.map((f) => f.type),
          how,
        ).to.deep.equal(['HEADERS', 'DATA']);
        expect(
          last.some((f) => f.endStream),
          `${how}: a half-close`,
        ).to.equal(false);
      } finally {
        subscription.unsubscribe();
        server.close();
      }
    }
  });

  it("fails with the server's message when the server refuses the protocol version (FAILED_PRECONDITION)", async () => {
    const l = open();
    const stream = await server.nextStream();
    await stream.waitFor(() => true);
    stream.close(grpc.status.FAILED_PRECONDITION, "Unsupported protocol version '0.8.0'");
    for (let i = 0; i < 50 && l.errors.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(l.errors[0]).to.be.instanceOf(ServerRefused);
    expect((l.errors[0] as Error).message).to.include("Unsupported protocol version '0.8.0'");
  });

  it('a refusal too long for HTTP/2 to read (100 000 characters) ends the call within seconds, not at the keepalive', async () => {
    const started = Date.now();
    const failed = firstValueFrom(connectAgent({ serverUrl: server.url, security: insecure }, new Subject<never>())).then(
      () => undefined,
      (e: Error) => e,
    );
    const stream = await server.nextStream();
    stream.close(grpc.status.FAILED_PRECONDITION, 'x'.repeat(100_000));
    const error = await failed;
    expect(error?.message).to.equal('the connection ended before an answer the agent can read (nghttp2 refuses a header field over 64 KiB)');
    expect(Date.now() - started, 'the keepalive would take 30 s').to.be.below(5000);
  });

  it('a web server that answers the call with a page is said to be no gRPC server, naming what it answered', async () => {
    const web = http2.createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<html>garbage{{</html>');
    });
    const port = await new Promise<number>((resolve) => web.listen(0, '127.0.0.1', () => resolve((web.address() as net.AddressInfo).port)));
    try {
      const error = await firstValueFrom(connectAgent({ serverUrl: `http://127.0.0.1:${port}`, security: insecure }, new Subject<never>())).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.equal('not a gRPC server: it answered text/html');
    } finally {
      web.close();
    }
  });

  it('a server that takes the connection but never answers (as if blackholed) fails the connection at its timeout, with the reason', async () => {
    const accepted: net.Socket[] = [];
    const silent = net.createServer((socket) => accepted.push(socket));
    const port = await new Promise<number>((resolve) => silent.listen(0, '127.0.0.1', () => resolve((silent.address() as net.AddressInfo).port)));
    try {
      const error = await firstValueFrom(
        connectAgent({ serverUrl: `http://127.0.0.1:${port}`, security: insecure, connectTimeoutMs: 500 }, new Subject<never>()),
      ).then(
        () => undefined,
        (e: Error & { code?: number }) => e,
      );
      expect(error?.message).to.equal(`the server did not answer within 0.5 s (http://127.0.0.1:${port})`);
      expect(error?.code).to.equal(grpc.status.UNAVAILABLE);
    } finally {
      silent.close();
      accepted.forEach((socket) => socket.destroy());
    }
  });

  it('notices a half-open connection through HTTP/2 keepalive within seconds and reconnects', async function () {
    this.timeout(20_000);
    // A proxy on loopback that can go silent on its open connections, as a dead peer would.
    const frozen = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(server.port, '127.0.0.1');
      client.on('data', (d) => !frozen.has(client) && upstream.write(d));
      upstream.on('data', (d) => !frozen.has(client) && client.write(d));
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ]) {
        a.on('error', () => b.destroy());
        a.on('close', () => b.destroy());
      }
      proxy.emit('connected', client);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const port = (proxy.address() as net.AddressInfo).port;
    const sockets: net.Socket[] = [];
    proxy.on('connected', (s: net.Socket) => sockets.push(s));
    const out$ = new Subject<ToServer>();
    const sub = serverLink(
      (o$) => connectAgent({ serverUrl: `http://127.0.0.1:${port}`, security: insecure, keepaliveMs: 1000, keepaliveTimeoutMs: 1000 }, o$),
      out$,
      {
        agentName: AGENT,
        log: silentLogger,
      },
    ).subscribe();
    subscriptions.push(sub);
    try {
      await (await server.nextStream()).waitFor((m) => m.ToServerEnum.case === 'agentHello');
      const silencedAt = Date.now();
      sockets.forEach((s) => frozen.add(s));
      const second = await server.nextStream(15_000, 1);
      await second.waitFor((m) => m.ToServerEnum.case === 'agentHello');
      expect(Date.now() - silencedAt).to.be.below(10_000);
    } finally {
      proxy.close();
      sockets.forEach((s) => s.destroy());
    }
  });

  describe('mTLS', () => {
    const dir = specFolder('ank-certs-');
    before(() => execFileSync('bash', [path.resolve('scripts/make-test-certs.sh'), dir]));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const pem = (name: string) => readFileSync(path.join(dir, name));

    // swdd~agent-provides-file-paths-to-communication-middleware~1
    it('connects with the agent certificate, checking the server certificate against the name ank-server', async () => {
      server.stop();
      server = await FakeAnkaiosServer.start({ tls: { ca: pem('ca.pem'), cert: pem('server.pem'), key: pem('server-key.pem') } });
      open({ security: { insecure: false, ca: pem('ca.pem'), cert: pem('agent.pem'), key: pem('agent-key.pem') } });
      const stream = await server.nextStream();
      expect((await stream.waitFor(() => true)).ToServerEnum.case).to.equal('agentHello');
    });

    it('presents the agent certificate alone, without the CA, as a released server demands ("Ambiguous agent certificates provided!" otherwise)', async () => {
      const presented = new Promise<number>((resolve) => {
        const raw = tls.createServer({ cert: pem('server.pem'), key: pem('server-key.pem'), requestCert: true, rejectUnauthorized: false }, (socket) => {
          // Without a CA of its own the server's view of the chain is exactly what the client sent.
          const chain: string[] = [];
          for (
            let c: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
            c?.raw && !chain.includes(c.fingerprint256);
            c = c.issuerCertificate
          )
            chain.push(c.fingerprint256);
          resolve(chain.length);
          socket.destroy();
          raw.close();
        });
        raw.listen(0, '127.0.0.1', () =>
          open(
            { security: { insecure: false, ca: pem('ca.pem'), cert: pem('agent.pem'), key: pem('agent-key.pem') } },
            `https://127.0.0.1:${(raw.address() as net.AddressInfo).port}`,
          ),
        );
      });
      expect(await presented).to.equal(1);
    });

    /** A logger that keeps the warnings: a refused handshake is told there, with TLS's reason. */
    const warnings = () => {
      const said: string[] = [];
      return { said, log: { ...silentLogger, warn: (text: string) => said.push(text) } };
    };

    it('does not connect to a server whose certificate names another host than ank-server: it tries, and TLS refuses', async () => {
      server.stop();
      server = await FakeAnkaiosServer.start({ tls: { ca: pem('ca.pem'), cert: pem('agent.pem'), key: pem('agent-key.pem') } });
      const { said, log } = warnings();
      open({ security: { insecure: false, ca: pem('ca.pem'), cert: pem('agent.pem'), key: pem('agent-key.pem') }, log });
      await until(() => said.length > 0, 'the refused attempt', 10_000);
      expect(said[0]).to.match(/No connection to the server \(.*(ank-server|altnames|certificate|verif)/i);
      expect(server.streams).to.have.length(0);
    });

    // swdd~agent-provides-file-paths-to-communication-middleware~1
    it('does not connect to a server whose certificate is for client authentication only, as the released agent refuses it', async () => {
      const quiet = { stdio: 'ignore' as const, cwd: dir };
      execFileSync(
        'openssl',
        [
          'req',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-subj',
          '/CN=ank-server',
          '-keyout',
          'client-only-key.pem',
          '-out',
          'client-only.csr',
        ],
        quiet,
      );
      writeFileSync(path.join(dir, 'client-only.ext'), 'subjectAltName=DNS:ank-server\nextendedKeyUsage=clientAuth\n');
      execFileSync(
        'openssl',
        [
          'x509',
          '-req',
          '-in',
          'client-only.csr',
          '-CA',
          'ca.pem',
          '-CAkey',
          'ca-key.pem',
          '-CAcreateserial',
          '-days',
          '2',
          '-extfile',
          'client-only.ext',
          '-out',
          'client-only.pem',
        ],
        quiet,
      );
      server.stop();
      server = await FakeAnkaiosServer.start({ tls: { ca: pem('ca.pem'), cert: pem('client-only.pem'), key: pem('client-only-key.pem') } });
      const { said, log } = warnings();
      open({ security: { insecure: false, ca: pem('ca.pem'), cert: pem('agent.pem'), key: pem('agent-key.pem') }, log });
      await until(() => said.length > 0, 'the refused attempt', 10_000);
      expect(said[0]).to.include('is not for server authentication (its uses: clientAuth)');
      expect(server.streams).to.have.length(0);
    });

    it('does not connect to a server whose certificate another CA signed: it tries, and TLS refuses', async () => {
      const other = specFolder('ank-certs-');
      execFileSync('bash', [path.resolve('scripts/make-test-certs.sh'), other]);
      const [cert, key] = [readFileSync(path.join(other, 'server.pem')), readFileSync(path.join(other, 'server-key.pem'))];
      rmSync(other, { recursive: true, force: true });
      server.stop();
      server = await FakeAnkaiosServer.start({ tls: { ca: pem('ca.pem'), cert, key } });
      const { said, log } = warnings();
      open({ security: { insecure: false, ca: pem('ca.pem'), cert: pem('agent.pem'), key: pem('agent-key.pem') }, log });
      await until(() => said.length > 0, 'the refused attempt', 10_000);
      expect(said[0]).to.match(/No connection to the server \(.*(certificate|verif|self.signed|issuer)/i);
      expect(server.streams).to.have.length(0);
    });
  });
});
