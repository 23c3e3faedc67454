// The protocol lines on the wire: a real loopback gRPC server of each line, as released servers behave.
import { create } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { ReplaySubject, Subject, type Subscription, filter, firstValueFrom, skip, timeout } from 'rxjs';
import { CompleteStateSchema } from '../../proto/gen/ank_base_pb.js';
import { LINE_0_8, LINE_1, lineOfRefusal, rewriteField } from '../../lib/codec/lines.js';
import { connectAgent } from '../../lib/drivers/grpc-connection.js';
import { silentLogger } from '../../lib/logger.js';
import type { FromServer, ToServer } from '../../lib/messages.js';
import { ServerRefused, serverLink } from '../../streams/server-link.js';
import { FakeAnkaiosServer, LINE_2, type ServerLine } from '../../scripts/harness/fake-server.js';
import { AGENT } from '../../scripts/harness/fixtures.js';

const hellos = (server: FakeAnkaiosServer) =>
  server.streams
    .map((s) => s.received[0])
    .filter((m) => m?.ToServerEnum.case === 'agentHello')
    .map((m) => m!.ToServerEnum.value as { protocolVersion: string; tags?: { tags: Record<string, string> } });

describe('protocol lines: negotiation with released servers (real gRPC on loopback)', () => {
  let server: FakeAnkaiosServer;
  let subscription: Subscription | undefined;
  afterEach(() => {
    subscription?.unsubscribe();
    server.stop();
  });

  function link(tags: Record<string, string> = {}) {
    const in$ = new ReplaySubject<FromServer>();
    const errors: Error[] = [];
    subscription = serverLink((o$, line) => connectAgent({ serverUrl: server.url, security: { insecure: true }, line }, o$), new Subject<ToServer>(), {
      agentName: AGENT,
      log: silentLogger,
      tags,
    }).subscribe({ next: (m) => in$.next(m), error: (e: Error) => errors.push(e) });
    return {
      in$,
      errors,
      connected: () =>
        firstValueFrom(
          in$.pipe(
            filter((m) => m.kind === 'connected'),
            timeout(10_000),
          ),
        ),
    };
  }
  const serve = async (line: ServerLine, port = 0) => (server = await FakeAnkaiosServer.start({ line, port, greet: true }));

  it('a 1.x server accepts the first hello (1.0.1, with the tags): the link speaks the 1 line', async () => {
    await serve(LINE_1);
    const l = link({ location: 'front' });
    const connected = await l.connected();
    expect(connected).to.deep.include({ kind: 'connected' });
    expect((connected as Extract<FromServer, { kind: 'connected' }>).lines.map((x) => x.name)).to.deep.equal(['1']);
    expect(hellos(server).map((h) => [h.protocolVersion, h.tags?.tags])).to.deep.equal([['1.0.1', { location: 'front' }]]);
    expect(server.refused).to.deep.equal([]);
  });

  it('a 0.8 server refuses 1.0.1 with the exact refusal; the agent asks again at once with 0.8.0 (no tags) and keeps that line', async () => {
    await serve(LINE_0_8);
    const l = link({ location: 'front' });
    const connected = await l.connected();
    expect((connected as Extract<FromServer, { kind: 'connected' }>).lines.map((x) => x.name)).to.deep.equal(['0.8']);
    expect(server.refused).to.deep.equal([['1.0.1', "Unsupported protocol version '1.0.1'. Currently supported '0.8'"]]);
    expect(hellos(server).map((h) => [h.protocolVersion, h.tags])).to.deep.equal([
      ['1.0.1', { $typeName: 'ank_base.Tags', tags: { location: 'front' } }],
      ['0.8.0', undefined],
    ]);
  });

  it('is cold: a second subscriber of the same link negotiates on its own, from the first line', async () => {
    await serve(LINE_0_8);
    const link$ = serverLink((o$, line) => connectAgent({ serverUrl: server.url, security: { insecure: true }, line }, o$), new Subject<ToServer>(), {
      agentName: AGENT,
      log: silentLogger,
    });
    const subscribeUntilConnected = () =>
      new Promise<Subscription>((resolve) => {
        const sub: Subscription = link$.subscribe((m) => m.kind === 'connected' && resolve(sub));
      });
    const first = await subscribeUntilConnected();
    const second = await subscribeUntilConnected();
    first.unsubscribe();
    second.unsubscribe();
    expect(hellos(server).map((h) => h.protocolVersion)).to.deep.equal(['1.0.1', '0.8.0', '1.0.1', '0.8.0']);
  });

  it('after a dropped connection negotiates again from its first line: a drop is no refusal', async () => {
    await serve(LINE_0_8);
    const l = link();
    await l.connected();
    const port = server.port;
    server.stop();
    await serve(LINE_0_8, port);
    await firstValueFrom(
      l.in$.pipe(
        filter((m) => m.kind === 'serverHello'),
        skip(1),
        timeout(10_000),
      ),
    );
    expect(hellos(server).map((h) => h.protocolVersion)).to.deep.equal(['1.0.1', '0.8.0']);
    expect(l.errors).to.deep.equal([]);
  });

  it("reads a 0.8 server's CompleteState response (field 4) as the CompleteStateResponse it stands for", async () => {
    await serve(LINE_0_8);
    const l = link();
    await l.connected();
    const stream = server.streams.at(-1)!;
    stream.send({
      FromServerEnum: {
        case: 'response',
        value: {
          requestId: 'w@1',
          ResponseContent: {
            case: 'completeStateResponse',
            value: {
              completeState: create(CompleteStateSchema, { desiredState: { apiVersion: 'v0.8' } }),
            },
          },
        },
      },
    });
    const response = await firstValueFrom(
      l.in$.pipe(
        filter((m) => m.kind === 'response'),
        timeout(5000),
      ),
    );
    const content = (response as Extract<FromServer, { kind: 'response' }>).response.ResponseContent;
    expect(content.case).to.equal('completeStateResponse');
    expect((content.value as { completeState: { desiredState: { apiVersion: string } } }).completeState.desiredState.apiVersion).to.equal('v0.8');
  });

  it('a server upgraded from 0.8 to 1.x while the connection was down accepts the agent on the 1 line (a rolling upgrade does not end it)', async () => {
    await serve(LINE_0_8);
    const l = link();
    await l.connected();
    const port = server.port;
    server.stop();
    await serve(LINE_1, port);
    const again = await firstValueFrom(
      l.in$.pipe(
        filter((m) => m.kind === 'connected' && m.lines[0] === LINE_1),
        timeout(15_000),
      ),
    );
    expect(again.kind).to.equal('connected');
    expect(server.refused).to.deep.equal([]);
    expect(l.errors).to.deep.equal([]);
  });

  it('a refusal with a detail of any size ends the link with one line of sane length', async () => {
    await serve(LINE_1);
    const l = link();
    const stream = await server.nextStream();
    stream.close(9, `Unsupported protocol version '1.0.1'. ${'x'.repeat(12_000)}`);
    for (let waited = 0; l.errors.length === 0 && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    expect(l.errors[0]).to.be.instanceOf(ServerRefused);
    expect(l.errors[0].message.length).to.be.below(600);
    expect(l.errors[0].message).to.match(/^The server refused the agent: Unsupported protocol version '1.0.1'\. x+… \(12038 characters\)$/);
  });

  it("a server of an unknown major (2) ends the link with the server's message: the agent exits", async () => {
    await serve(LINE_2);
    const l = link();
    for (let waited = 0; l.errors.length === 0 && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    expect(l.errors[0]).to.be.instanceOf(ServerRefused);
    expect(l.errors[0].message).to.equal("The server refused the agent: Unsupported protocol version '1.0.1'. Currently supported '2'");
    expect(server.streams).to.have.length(1);
  });
});

describe('protocol lines: the codec at the edge', () => {
  it('names the line of a refusal, and only lines the agent speaks', () => {
    expect(lineOfRefusal("Unsupported protocol version '1.0.1'. Currently supported '0.8'")).to.equal(LINE_0_8);
    expect(lineOfRefusal("Unsupported protocol version '0.8.0'. Currently supported '1'")).to.equal(LINE_1);
    expect(lineOfRefusal("Unsupported protocol version '1.0.1'. Currently supported '2'")).to.equal(undefined);
    expect(lineOfRefusal('Unsupported protocol version')).to.equal(undefined);
  });

  it('converts Response field 4 both ways and leaves every other byte as it is', () => {
    // FromAnkaios{response{requestId "r1", field 4: CompleteState{desiredState{apiVersion "v"}}}, a trailing unknown field 9}
    const state = Uint8Array.of(0x0a, 0x03, 0x0a, 0x01, 0x76);
    const v08 = Uint8Array.of(0x1a, 4 + 2 + state.length, 0x0a, 0x02, 0x72, 0x31, 0x22, state.length, ...state, 0x48, 0x01);
    const v1 = LINE_0_8.read(v08);
    expect([...v1]).to.deep.equal([0x1a, 4 + 4 + state.length, 0x0a, 0x02, 0x72, 0x31, 0x22, state.length + 2, 0x0a, state.length, ...state, 0x48, 0x01]);
    expect([...LINE_0_8.write(v1)]).to.deep.equal([...v08]);
    expect(LINE_1.read(v08)).to.equal(v08);
    expect([...rewriteField(Uint8Array.of(0x08, 0x01), [3, 4], () => Uint8Array.of())]).to.deep.equal([0x08, 0x01]);
  });
});
