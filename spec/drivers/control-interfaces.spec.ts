// Control Interfaces on real FIFOs.
import { until } from '../../scripts/harness/wait.js';
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { create } from '@bufbuild/protobuf';
import { expect } from 'chai';
import { filter, firstValueFrom, lastValueFrom, startWith, take, timeout } from 'rxjs';
import { ErrorSchema, ResponseSchema } from '../../proto/gen/ank_base_pb.js';
import type { Request } from '../../lib/codec/control-api.js';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import { ControlInterfaceHub } from '../../scripts/harness/control-interfaces.js';
import { silentLogger } from '../../lib/logger.js';
import type { AccessRule, WorkloadSpec } from '../../lib/workload.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { specFolder } from '../../scripts/harness/temp.js';

const readState = (...filterMasks: string[]): AccessRule => ({ kind: 'state', operation: 'Read', filterMasks });
const withAccess = (name: string, allowRules: AccessRule[], denyRules: AccessRule[] = []): WorkloadSpec => ({
  ...workload(name),
  controlInterfaceAccess: { allowRules, denyRules },
});

describe('Control Interfaces on real FIFOs', () => {
  let io: string;
  let hub: ControlInterfaceHub;
  const clients: ControlInterfaceClient[] = [];
  beforeEach(() => {
    io = specFolder('ank-ci-');
    hub = new ControlInterfaceHub(io, silentLogger);
  });
  afterEach(() => {
    clients.splice(0).forEach((c) => c.close());
    hub.closeAll();
    rmSync(io, { recursive: true, force: true });
  });
  const open = async (spec: WorkloadSpec, options?: { read?: boolean }) => {
    const { controlInterfacePath } = await firstValueFrom(hub.prepare(spec));
    const client = new ControlInterfaceClient(controlInterfacePath!, options);
    clients.push(client);
    return client;
  };
  /** A client whose Hello the agent has accepted. */
  const session = async (spec: WorkloadSpec) => {
    const client = await open(spec);
    client.hello();
    await client.next();
    return client;
  };
  const nextRequest = () => firstValueFrom(hub.requests$.pipe(timeout(5000)));
  const controlInterfaceFolderOf = (spec: WorkloadSpec) => controlInterfaceFolder(io, spec);

  // swdd~agent-control-interface-created-for-eligible-workloads~1, swdd~agent-create-control-interface-pipes-per-workload~2, swdd~agent-control-interface-creates-two-pipes-per-workload~1, swdd~agent-control-interface-pipes-path-naming~2
  it('two FIFOs under <run folder>/<agent>_io/<workload>.<id>/control_interface, only with allow rules', async () => {
    const spec = withAccess('reader', [readState('desiredState')]);
    const { controlInterfacePath } = await firstValueFrom(hub.prepare(spec));
    expect(controlInterfacePath).to.equal(path.join(io, `reader.${spec.instanceName.id}`, 'control_interface'));
    expect(lstatSync(path.join(controlInterfacePath!, 'input')).isFIFO()).to.equal(true);
    expect(lstatSync(path.join(controlInterfacePath!, 'output')).isFIFO()).to.equal(true);
    expect(await firstValueFrom(hub.prepare(workload('plain')))).to.deep.equal({});
    await lastValueFrom(hub.release(spec), { defaultValue: undefined });
    expect(existsSync(path.dirname(controlInterfacePath!))).to.equal(false);
  });

  // swdd~agent-workload-control-loop-executes-delete~3, swdd~agent-delete-old-workload~3
  it('a deleted workload is no longer heard: its pipes are closed and its folder goes, also with a client still attached', async () => {
    const spec = withAccess('leaving', [readState('desiredState')]);
    const client = await session(spec);
    const requests: string[] = [];
    const sub = hub.requests$.subscribe((r) => requests.push(r.requestId));
    client.askState('before', 'desiredState');
    await until(() => requests.length === 1, 'the request before the delete');
    await lastValueFrom(hub.release(spec), { defaultValue: undefined });
    expect(existsSync(path.dirname(controlInterfaceFolderOf(spec)))).to.equal(false);
    // What the old client still writes reaches nobody (its FIFO has no reader in the agent any more).
    try {
      client.askState('after', 'desiredState');
    } catch {
      // EPIPE or EAGAIN: the agent has let go of the pipe
    }
    await new Promise((r) => setTimeout(r, 300));
    sub.unsubscribe();
    expect(requests).to.deep.equal(['leaving@before']);
  });

  // swdd~control-interface-accepted-message-on-initial-hello~1, swdd~agent-ensures-control-interface-input-pipe-read~1
  it('answers a compatible Hello with ControlInterfaceAccepted', async () => {
    const client = await open(withAccess('w', [readState('desiredState')]));
    client.hello();
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
  });

  // swdd~agent-closes-control-interface-on-missing-initial-hello~1
  it('closes the connection on a request before Hello ("Initial Hello missing!") and on an incompatible version; a new Hello starts again', async () => {
    const client = await open(withAccess('w', [readState('desiredState')]));
    client.askState('1', 'desiredState');
    expect((await client.next()).FromAnkaiosEnum).to.deep.include({ case: 'connectionClosed' });
    expect(client.received[0].FromAnkaiosEnum.value).to.deep.include({ reason: 'Initial Hello missing!' });
    client.askState('2', 'desiredState');
    client.hello('0.7.0');
    const refused = await client.next();
    expect(refused.FromAnkaiosEnum.case).to.equal('connectionClosed');
    expect((refused.FromAnkaiosEnum.value as { reason: string }).reason).to.include("Unsupported protocol version '0.7.0'");
    client.hello();
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
  });

  it('the reference\'s texts; before Hello a frame that does not decode closes ("Could not decode protobuf data"), after it such a frame is skipped and the session goes on', async () => {
    const client = await open(withAccess('w', [readState('desiredState')]));
    const junk = Uint8Array.of(4, 0xff, 0xff, 0xff, 0xff);
    client.sendRaw(junk);
    expect((await client.next()).FromAnkaiosEnum.value).to.deep.include({ reason: 'Could not decode protobuf data' });
    client.hello();
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
    const forwarded = nextRequest();
    client.sendRaw(junk);
    client.askState('after-junk', 'desiredState');
    expect((await forwarded).requestId).to.equal('w@after-junk');
    client.askState('denied', 'workloadStates');
    expect((await client.next()).FromAnkaiosEnum.value).to.deep.include({
      requestId: 'denied',
      ResponseContent: { case: 'error', value: create(ErrorSchema, { message: 'Access denied' }) },
    });
    expect(client.received.map((m) => m.FromAnkaiosEnum.case)).to.deep.equal(['connectionClosed', 'controlInterfaceAccepted', 'response']);
  });

  // swdd~agent-uses-length-delimited-protobuf-for-pipes~1
  it('reassembles a frame the workload writes in pieces', async () => {
    const client = await open(withAccess('w', [readState('desiredState')]));
    const hello = ControlInterfaceClient.frame({ ToAnkaiosEnum: { case: 'hello', value: { protocolVersion: '0.8.0' } } });
    client.sendRaw(hello.subarray(0, 3));
    await new Promise((r) => setTimeout(r, 50));
    client.sendRaw(hello.subarray(3));
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
  });

  // swdd~agent-listens-for-requests-from-pipe~1, swdd~agent-converts-control-interface-message-to-ankaios-object~1, swdd~agent-forward-request-from-control-interface-pipe-to-server~2, swdd~agent-adds-workload-prefix-id-control-interface-request~1
  it('an allowed request goes to the server as <workload>@<request id>', async () => {
    const client = await session(withAccess('reader', [readState('desiredState')]));
    const forwarded = nextRequest();
    client.askState('req-1', 'desiredState.workloads');
    const request = await forwarded;
    expect(request.requestId).to.equal('reader@req-1');
    expect(request.RequestContent).to.deep.include({ case: 'completeStateRequest' });
  });

  it('a session that ends (a new Hello, or the workload gone) ends its event subscriptions at the server; what the server still says of them reaches nobody', async () => {
    const spec = withAccess('watcher', [readState('desiredState')]);
    const client = await session(spec);
    const subscribe = (requestId: string) =>
      client.send({
        ToAnkaiosEnum: {
          case: 'request',
          value: { requestId, RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['desiredState'], subscribeForEvents: true } } },
        },
      });
    let next = nextRequest();
    subscribe('sub1');
    expect((await next).requestId).to.equal('watcher@sub1');
    next = nextRequest();
    client.hello();
    const cancel = await next;
    expect([cancel.requestId, cancel.RequestContent.case]).to.deep.equal(['watcher@sub1', 'eventsCancelRequest']);
    await client.next();
    const seen = client.received.length;
    hub.deliver(
      create(ResponseSchema, {
        requestId: 'watcher@sub1',
        ResponseContent: { case: 'completeStateResponse', value: { alteredFields: { addedFields: ['desiredState.x'] } } },
      }),
    );
    hub.deliver(create(ResponseSchema, { requestId: 'watcher@sub1', ResponseContent: { case: 'eventsCancelAccepted', value: {} } }));
    // The new session's own request is answered; nothing of the ended subscription came before it.
    hub.deliver(create(ResponseSchema, { requestId: 'watcher@mark', ResponseContent: { case: 'error', value: { message: 'mark' } } }));
    expect((await client.next()).FromAnkaiosEnum.value).to.deep.include({ requestId: 'mark' });
    expect(client.received.length).to.equal(seen + 1);
    next = nextRequest();
    subscribe('sub2');
    await next;
    next = nextRequest();
    await lastValueFrom(hub.release(spec), { defaultValue: undefined });
    const gone = await next;
    expect([gone.requestId, gone.RequestContent.case]).to.deep.equal(['watcher@sub2', 'eventsCancelRequest']);
  });

  it('a message larger than the agent takes (5 MiB) is passed over; the accepted session goes on and its next request is forwarded', async () => {
    const spec = withAccess('big', [readState('desiredState')]);
    const client = await session(spec);
    const big = ControlInterfaceClient.frame({
      ToAnkaiosEnum: {
        case: 'request',
        value: { requestId: 'huge', RequestContent: { case: 'completeStateRequest', value: { fieldMask: ['x'.repeat(5 * 1024 * 1024)] } } },
      },
    });
    const file = path.join(io, 'big.frame');
    writeFileSync(file, big);
    // Written by another process: the pipe holds 64 KiB, and the agent reading it lives in this one.
    await promisify(execFile)('sh', ['-c', 'cat "$0" > "$1"', file, path.join(controlInterfaceFolder(io, spec), 'output')]);
    const next = nextRequest();
    client.askState('after', 'desiredState');
    expect((await next).requestId).to.equal('big@after');
    expect(client.received.map((m) => m.FromAnkaiosEnum.case)).to.not.include('connectionClosed');
  });

  // swdd~agent-responses-to-denied-request-from-control-interface~1, swdd~agent-responses-to-denied-request-from-control-interface-contains-request-id~1
  it('a denied request gets "Access denied" and nothing reaches the server', async () => {
    const client = await open(withAccess('reader', [readState('desiredState')], [readState('desiredState.workloads.secret')]));
    const forwarded: Request[] = [];
    const sub = hub.requests$.subscribe((r) => forwarded.push(r));
    client.hello();
    await client.next();
    client.askState('r1', 'desiredState.workloads.secret');
    client.askState('r2', 'workloadStates');
    const answers = [await client.next(), await client.next()];
    for (const [answer, id] of [
      [answers[0], 'r1'],
      [answers[1], 'r2'],
    ] as const) {
      expect(answer.FromAnkaiosEnum.case).to.equal('response');
      const response = answer.FromAnkaiosEnum.value as { requestId: string; ResponseContent: unknown };
      expect(response.requestId).to.equal(id);
      expect(response.ResponseContent).to.deep.include({ case: 'error' });
      expect((response.ResponseContent as { value: { message: string } }).value.message).to.equal('Access denied');
    }
    sub.unsubscribe();
    expect(forwarded).to.deep.equal([]);
  });

  // swdd~agent-forward-responses-to-control-interface-pipe~1, swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1, swdd~agent-remove-id-prefix-forwarding-control-interface-response~1
  it('responses go to the workload named by the prefix, without it', async () => {
    const a = await session(withAccess('wl_a', [readState('*')]));
    const b = await session(withAccess('wl_b', [readState('*')]));
    hub.deliver(create(ResponseSchema, { requestId: 'wl_b@42', ResponseContent: { case: 'completeStateResponse', value: {} } }));
    hub.deliver(create(ResponseSchema, { requestId: 'gone@1', ResponseContent: { case: 'completeStateResponse', value: {} } }));
    hub.deliver(create(ResponseSchema, { requestId: 'wl_a@7', ResponseContent: { case: 'completeStateResponse', value: {} } }));
    expect((await b.next()).FromAnkaiosEnum.value).to.deep.include({ requestId: '42' });
    expect((await a.next()).FromAnkaiosEnum.value).to.deep.include({ requestId: '7' });
    await new Promise((r) => setTimeout(r, 100));
    expect(a.received).to.have.length(2);
    expect(b.received).to.have.length(2);
  });

  const logEntries = (requestId: string, text: string) =>
    create(ResponseSchema, {
      requestId,
      ResponseContent: {
        case: 'logEntriesResponse',
        value: {
          logEntries: [{ workloadName: { workloadName: 'nav', agentName: 'agent_A', id: 'x' }, message: text }],
        },
      },
    });

  // swdd~agent-handles-control-interface-full-output-pipe-buffer~1
  // swdd~agent-handles-control-interface-full-output-pipe-buffer~1
  // swdd~agent-handles-control-interface-workload-gone~1
  it('a workload that does not read is gone once a write waited 500 ms: what waits for it is dropped, its log stream cancelled once, and it is written to again when it reads', async function () {
    this.timeout(20_000);
    const client = await open(withAccess('sleepy', [readState('*')]), { read: false });
    client.hello();
    await new Promise((r) => setTimeout(r, 100));
    const cancels: Request[] = [];
    const watching = hub.requests$.subscribe((r) => cancels.push(r));
    const started = Date.now();
    const line = 'x'.repeat(1000);
    // 0.9 MiB of log entries (what may wait in the agent) for a pipe of 64 KiB
    for (let i = 0; i < 900; i++) hub.deliver(logEntries('sleepy@logs', line));
    expect(cancels, 'before the workload had its 500 ms').to.deep.equal([]);
    const cancelled = await firstValueFrom(
      hub.requests$.pipe(
        startWith(...cancels),
        filter((r) => r.RequestContent.case === 'logsCancelRequest'),
        timeout(5000),
      ),
    );
    // The released design's numbers: a write that waits 500 ms counts as a gone reader.
    expect(Date.now() - started, 'waited for the workload').to.be.at.least(500 - 50);
    expect(cancelled.requestId).to.equal('sleepy@logs');
    // entries the server sends before it stops are not written, and the stream is cancelled only once
    for (let i = 0; i < 100; i++) hub.deliver(logEntries('sleepy@logs', line));
    client.resume();
    await new Promise((r) => setTimeout(r, 300));
    watching.unsubscribe();
    expect(cancels.map((r) => r.RequestContent.case)).to.deep.equal(['logsCancelRequest']);
    const entries = client.received.filter((m) => m.FromAnkaiosEnum.case === 'response').length;
    // what the pipe (64 KiB) and the client's own read buffer held when it was gone; the rest was dropped
    expect(entries, 'what reached the workload')
      .to.be.above(0)
      .and.at.most(Math.ceil((2 * 64 * 1024) / 1000));
    // the workload reads again: it is written to
    hub.deliver(create(ResponseSchema, { requestId: 'sleepy@late', ResponseContent: { case: 'error', value: { message: 'late' } } }));
    await new Promise((r) => setTimeout(r, 200));
    expect(client.received.at(-1)!.FromAnkaiosEnum.value).to.deep.include({ requestId: 'late' });
  });

  // swdd~agent-handles-control-interface-output-pipe-closed~1
  // swdd~agent-handles-control-interface-workload-gone~1
  it('a workload that closed its input pipe gets what the agent writes if it opens the pipe again within 5 × 100 ms; if it does not, it is gone and its log stream is cancelled', async () => {
    const client = await session(withAccess('blinker', [readState('*')]));
    client.closeInput();
    hub.deliver(create(ResponseSchema, { requestId: 'blinker@1', ResponseContent: { case: 'error', value: { message: 'wait for me' } } }));
    await new Promise((r) => setTimeout(r, 250));
    client.openInput();
    expect((await client.next()).FromAnkaiosEnum.value).to.deep.include({ requestId: '1' });
    client.closeInput();
    const started = Date.now();
    const cancel = nextRequest();
    hub.deliver(logEntries('blinker@l1', 'nobody reads this'));
    const cancelled = await cancel;
    // The released design's numbers: a closed input pipe is tried again 5 times, 100 ms apart.
    expect(Date.now() - started, 'retried for').to.be.at.least(5 * 100 - 50);
    expect(cancelled).to.deep.include({ requestId: 'blinker@l1' });
    expect(cancelled.RequestContent.case).to.equal('logsCancelRequest');
  });

  it("garbage on one workload's pipe (random bytes, a huge length prefix, wrong messages) closes only that connection; the others go on", async () => {
    const noisy = await session(withAccess('noisy', [readState('*')]));
    const calm = await session(withAccess('calm', [readState('*')]));
    noisy.sendRaw(Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3]));
    const closed = await noisy.next();
    expect(closed.FromAnkaiosEnum.case).to.equal('connectionClosed');
    for (let i = 0; i < 200; i++) noisy.sendRaw(Uint8Array.from({ length: 1 + Math.floor(Math.random() * 200) }, () => Math.floor(Math.random() * 256)));
    const forwarded = firstValueFrom(hub.requests$.pipe(take(1), timeout(5000)));
    calm.askState('fine', 'desiredState');
    expect((await forwarded).requestId).to.equal('calm@fine');
    // the noisy workload can start over with a fresh Hello once its pipe is clean
    await new Promise((r) => setTimeout(r, 100));
    noisy.hello();
    const accepted = () => noisy.received.slice(2).some((m) => m.FromAnkaiosEnum.case === 'controlInterfaceAccepted');
    for (let waited = 0; !accepted() && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    expect(noisy.received.slice(2).map((m) => m.FromAnkaiosEnum.case)).to.include('controlInterfaceAccepted');
  });

  it("256 KiB of the crafted 0x88 0x7f pattern on one pipe does not hold up another workload's round trip", async () => {
    const noisy = await session(withAccess('noisy', [readState('*')]));
    const calm = await session(withAccess('calm', [readState('*')]));
    const pattern = Buffer.alloc(64 * 1024).map((_, i) => (i % 2 === 0 ? 0x88 : 0x7f));
    const writing = (async () => {
      for (let i = 0; i < 4; i++) {
        try {
          noisy.sendRaw(pattern);
        } catch {
          await new Promise((r) => setTimeout(r, 5)); // the pipe is full for a moment: the agent reads on
        }
      }
    })();
    const forwarded = firstValueFrom(
      hub.requests$.pipe(
        filter((r) => r.requestId.startsWith('calm@')),
        take(1),
        timeout(2000),
      ),
    );
    calm.askState('meanwhile', 'desiredState');
    expect((await forwarded).requestId).to.equal('calm@meanwhile');
    await writing;
  });

  // swdd~agent-handles-control-interface-workload-gone~1
  it('logs through the Control Interface: a LogRule lets the request through; log responses for a gone workload cancel it at the server', async () => {
    const client = await session(withAccess('viewer', [{ kind: 'log', workloadNames: ['ivi_*', 'nav'] }]));
    const forwarded = nextRequest();
    client.send({
      ToAnkaiosEnum: {
        case: 'request',
        value: {
          requestId: 'l1',
          RequestContent: {
            case: 'logsRequest',
            value: {
              workloadNames: [{ workloadName: 'nav', agentName: 'agent_A', id: 'x' }],
              follow: true,
            },
          },
        },
      },
    });
    const request = await forwarded;
    expect(request.requestId).to.equal('viewer@l1');
    expect(request.RequestContent.case).to.equal('logsRequest');
    const cancel = nextRequest();
    hub.deliver(create(ResponseSchema, { requestId: 'gone@l9', ResponseContent: { case: 'logEntriesResponse', value: { logEntries: [] } } }));
    const cancelled = await cancel;
    expect(cancelled.requestId).to.equal('gone@l9');
    expect(cancelled.RequestContent.case).to.equal('logsCancelRequest');
  });

  // swdd~agent-create-control-interface-pipes-per-workload~2
  it('a client that keeps its descriptors across an agent restart is heard again (the FIFOs are reused)', async () => {
    const spec = withAccess('keeper', [readState('*')]);
    const client = await session(spec);
    const folder = controlInterfaceFolder(io, spec);
    const inodes = ['input', 'output'].map((f) => lstatSync(path.join(folder, f)).ino);
    hub.closeAll();
    hub = new ControlInterfaceHub(io, silentLogger);
    await firstValueFrom(hub.prepare(spec));
    expect(['input', 'output'].map((f) => lstatSync(path.join(folder, f)).ino)).to.deep.equal(inodes);
    client.hello();
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
  });

  it('pipes a workload swapped (symlinks, a file) are made afresh on resume; a pipe swapped while open is never written through', async () => {
    const spec = withAccess('swapper', [readState('*')]);
    const { controlInterfacePath } = await firstValueFrom(hub.prepare(spec));
    const folder = controlInterfacePath!;
    const hostFile = path.join(io, 'host-file');
    writeFileSync(hostFile, '');
    const client = new ControlInterfaceClient(folder);
    clients.push(client);
    client.hello();
    await client.next();
    // Swapped while open: the agent keeps writing into the pipe it opened, never into the file.
    rmSync(path.join(folder, 'input'));
    symlinkSync(hostFile, path.join(folder, 'input'));
    hub.deliver(create(ResponseSchema, { requestId: 'swapper@x', ResponseContent: { case: 'error', value: { message: 'not for the host' } } }));
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('response');
    expect(readFileSync(hostFile, 'utf8')).to.equal('');
    // Swapped across a restart of the agent: the pipes are made again.
    hub.closeAll();
    rmSync(path.join(folder, 'output'));
    writeFileSync(path.join(folder, 'output'), 'a file');
    await firstValueFrom(hub.prepare(spec));
    expect(lstatSync(path.join(folder, 'input')).isFIFO()).to.equal(true);
    expect(lstatSync(path.join(folder, 'output')).isFIFO()).to.equal(true);
    expect(readFileSync(hostFile, 'utf8')).to.equal('');
  });

  // swdd~agent-workload-obj-update-command~2, swdd~agent-compares-control-interface-metadata~2
  it('an update that keeps the path and the rules keeps the open Control Interface; other rules open it anew, and the new rules decide', async () => {
    const before = withAccess('changer', [readState('desiredState')]);
    const client = await session(before);
    await firstValueFrom(hub.prepare({ ...before }));
    client.askState('same', 'desiredState');
    expect((await nextRequest()).requestId).to.equal('changer@same');
    const after = { ...before, controlInterfaceAccess: { allowRules: [readState('desiredState')], denyRules: [readState('desiredState')] } };
    await firstValueFrom(hub.prepare(after));
    client.hello();
    expect((await client.next()).FromAnkaiosEnum.case).to.equal('controlInterfaceAccepted');
    client.askState('denied', 'desiredState');
    const answer = (await client.next()).FromAnkaiosEnum.value as { requestId: string; ResponseContent: { case: string; value: { message: string } } };
    expect([answer.requestId, answer.ResponseContent.case, answer.ResponseContent.value.message]).to.deep.equal(['denied', 'error', 'Access denied']);
    expect(controlInterfaceFolder(io, after)).to.equal(controlInterfaceFolder(io, before));
  });

  it('a folder of a resumed workload is reused', async () => {
    const spec = withAccess('again', [readState('*')]);
    const first = await firstValueFrom(hub.prepare(spec));
    hub.closeAll();
    expect(await firstValueFrom(hub.prepare(spec))).to.deep.equal(first);
    expect(controlInterfaceFolder(io, spec)).to.equal(first.controlInterfacePath);
  });
});
