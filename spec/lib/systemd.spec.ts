// The pure parts of the systemd runtime: its runtime config, the D-Bus messages systemd sends, the unit states
// and the workload states they make, and the watch that keeps them from news and shows.
import { expect } from 'chai';
import { Subject, defer, delay, distinctUntilChanged, ignoreElements, map, merge, of, tap, throwError } from 'rxjs';
import { DbusWireError, MAX_MESSAGE_BYTES, parseSignature, readBody, splitMessages, unitPath } from '../../lib/runtimes/systemd/dbus-wire.js';
import { type BusNews, unitNews } from '../../lib/runtimes/systemd/events.js';
import { parseUnitConfig } from '../../lib/runtimes/systemd/unit-config.js';
import { EMPTY_VIEW, activeSince, learn, parseShow, unitExecutionState } from '../../lib/runtimes/systemd/unit-state.js';
import { UnitWatch } from '../../lib/runtimes/systemd/unit-watch.js';
import { formatState } from '../../lib/execution-state.js';
import type { UnitProps } from '../../lib/runtimes/systemd/unit-state.js';
import { testScheduler } from '../helpers/virtual-time.js';

/** A D-Bus writer for the tests: the basic and container types a PropertiesChanged signal holds. */
class Writer {
  bytes: number[] = [];
  constructor(private readonly little = true) {}
  pad(to: number) {
    while (this.bytes.length % to) this.bytes.push(0);
  }
  uint(value: number, size: 1 | 4) {
    this.pad(size);
    const b = Buffer.alloc(size);
    if (size === 1) b.writeUInt8(value);
    else if (this.little) b.writeUInt32LE(value);
    else b.writeUInt32BE(value);
    this.bytes.push(...b);
  }
  int(value: number) {
    this.pad(4);
    const b = Buffer.alloc(4);
    if (this.little) b.writeInt32LE(value);
    else b.writeInt32BE(value);
    this.bytes.push(...b);
  }
  u64(value: bigint) {
    this.pad(8);
    const b = Buffer.alloc(8);
    if (this.little) b.writeBigUInt64LE(value);
    else b.writeBigUInt64BE(value);
    this.bytes.push(...b);
  }
  string(value: string, code: 's' | 'o' | 'g' = 's') {
    if (code === 'g') this.uint(Buffer.byteLength(value), 1);
    else this.uint(Buffer.byteLength(value), 4);
    this.bytes.push(...Buffer.from(value), 0);
  }
  array(elementAlign: number, fill: () => void) {
    this.uint(0, 4);
    const lengthAt = this.bytes.length - 4;
    this.pad(elementAlign);
    const start = this.bytes.length;
    fill();
    const b = Buffer.alloc(4);
    if (this.little) b.writeUInt32LE(this.bytes.length - start);
    else b.writeUInt32BE(this.bytes.length - start);
    this.bytes.splice(lengthAt, 4, ...b);
  }
}

type Prop = [string, 's' | 'i' | 't' | 'as', string | number | bigint | string[]];

/** A PropertiesChanged signal of `path`'s `iface`, as systemd sends it. */
function propertiesChanged(path: string, iface: string, changed: Prop[], invalidated: string[] = [], little = true): Buffer {
  const body = new Writer(little);
  body.string(iface);
  body.array(8, () => {
    for (const [name, type, value] of changed) {
      body.pad(8);
      body.string(name);
      body.string(type, 'g');
      if (type === 's') body.string(value as string);
      else if (type === 'i') body.int(value as number);
      else if (type === 't') body.u64(value as bigint);
      else body.array(4, () => (value as string[]).forEach((v) => body.string(v)));
    }
  });
  body.array(4, () => invalidated.forEach((v) => body.string(v)));
  const head = new Writer(little);
  head.uint(little ? 0x6c : 0x42, 1);
  head.uint(4, 1);
  head.uint(1, 1);
  head.uint(1, 1);
  head.uint(body.bytes.length, 4);
  head.uint(7, 4);
  const fields: Array<[number, 'o' | 's' | 'g', string]> = [
    [1, 'o', path],
    [2, 's', 'org.freedesktop.DBus.Properties'],
    [3, 's', 'PropertiesChanged'],
    [8, 'g', 'sa{sv}as'],
  ];
  head.array(8, () => {
    for (const [code, type, value] of fields) {
      head.pad(8);
      head.uint(code, 1);
      head.string(type, 'g');
      head.string(value, type);
    }
  });
  head.pad(8);
  return Buffer.from([...head.bytes, ...body.bytes]);
}

const WEB = unitPath('web.service');

describe('the systemd runtime: its config', () => {
  // rx~systemd-config~1
  it('reads serviceName, desiredState (running unless said) and the general options that select the manager', () => {
    expect(parseUnitConfig('serviceName: nginx.service\n')).to.deep.equal({ serviceName: 'nginx.service', desiredState: 'running', generalOptions: [] });
    expect(parseUnitConfig('serviceName: getty@tty1.service\ndesiredState: restarted\ngeneralOptions: ["--host", "car-2", "--user"]')).to.deep.equal({
      serviceName: 'getty@tty1.service',
      desiredState: 'restarted',
      generalOptions: ['--host', 'car-2', '--user'],
    });
    expect(parseUnitConfig('serviceName: a.timer\ndesiredState: stopped\ngeneralOptions: ["-M", "box", "--machine=box"]').desiredState).to.equal('stopped');
  });

  // rx~systemd-config~1
  it('refuses a name with other characters, without a unit type, or one that reads as an option, naming the field', () => {
    for (const [name, why] of [
      ['nginx', /must be a unit name ending in a unit type/],
      ['.service', /must be a unit name ending in a unit type/],
      ['a b.service', /may hold only letters, digits/],
      ['../x.service', /may hold only letters, digits/],
      ['a;reboot.service', /may hold only letters, digits/],
      ['-H.service', /must be a unit name/],
    ] as const) {
      expect(() => parseUnitConfig(`serviceName: "${name}"`), name).to.throw(why);
    }
    expect(() => parseUnitConfig('desiredState: running')).to.throw("The runtime config field 'serviceName' is missing.");
    expect(() => parseUnitConfig('serviceName: a.service\ndesiredState: reloaded')).to.throw(
      "'desiredState' must be one of running, stopped, restarted, not 'reloaded'",
    );
  });

  // rx~systemd-config~1
  it('takes no general option but those that select the manager: systemctl runs as root', () => {
    for (const options of [['--root=/'], ['--job-mode=isolate'], ['--host'], ['--host', '--user'], ['--host=a b'], ['-H', 'x;y'], ['--user=x']]) {
      expect(() => parseUnitConfig(`serviceName: a.service\ngeneralOptions: ${JSON.stringify(options)}`), options.join(' ')).to.throw(/general option/);
    }
  });
});

describe('the systemd runtime: the D-Bus messages systemd sends', () => {
  // rx~systemd-events~1
  it("reads a unit's PropertiesChanged: its path, interface and the changed values, in either byte order", () => {
    for (const little of [true, false]) {
      const message = propertiesChanged(
        WEB,
        'org.freedesktop.systemd1.Unit',
        [
          ['ActiveState', 's', 'failed'],
          ['Names', 'as', ['web.service', 'www.service']],
          ['ActiveEnterTimestampMonotonic', 't', 123_456_789n],
        ],
        ['Conditions'],
        little,
      );
      const { messages, used } = splitMessages(message);
      expect(used).to.equal(message.length);
      expect(messages).to.have.length(1);
      expect(messages[0]).to.include({ type: 4, path: '/org/freedesktop/systemd1/unit/web_2eservice', member: 'PropertiesChanged', signature: 'sa{sv}as' });
      const [iface, changed, invalidated] = readBody(messages[0]);
      expect(iface).to.equal('org.freedesktop.systemd1.Unit');
      expect(changed).to.deep.equal(
        new Map<unknown, unknown>([
          ['ActiveState', 'failed'],
          ['Names', ['web.service', 'www.service']],
          ['ActiveEnterTimestampMonotonic', 123_456_789n],
        ]),
      );
      expect(invalidated).to.deep.equal(['Conditions']);
    }
  });

  // rx~systemd-events~1
  it('waits for the rest of a message split across reads, and reads two in one', () => {
    const one = propertiesChanged(WEB, 'org.freedesktop.systemd1.Unit', [['SubState', 's', 'running']]);
    const two = propertiesChanged(WEB, 'org.freedesktop.systemd1.Service', [['ExecMainStatus', 'i', -3]]);
    expect(splitMessages(one.subarray(0, 20))).to.deep.equal({ messages: [], used: 0 });
    const both = splitMessages(Buffer.concat([one, two, two.subarray(0, 5)]));
    expect(both.messages).to.have.length(2);
    expect(both.used).to.equal(one.length + two.length);
    expect(readBody(both.messages[1])[1]).to.deep.equal(new Map([['ExecMainStatus', -3]]));
  });

  // rx~systemd-events~1
  it('refuses bytes that cannot be a message: no byte-order mark, a length past the bound, values past the end, a signature too deep', () => {
    expect(() => splitMessages(Buffer.alloc(16, 0x41))).to.throw(DbusWireError, /endianness/);
    const huge = propertiesChanged(WEB, 'x', []);
    huge.writeUInt32LE(MAX_MESSAGE_BYTES, 4);
    expect(() => splitMessages(huge)).to.throw(DbusWireError, /a message of/);
    const lying = propertiesChanged(WEB, 'org.freedesktop.systemd1.Unit', [['ActiveState', 's', 'active']]);
    const message = splitMessages(lying).messages[0];
    // The body's first string says it is longer than the message.
    lying.writeUInt32LE(1_000_000, message.bodyOffset);
    expect(() => readBody(message)).to.throw(DbusWireError, /past the end/);
    expect(() => parseSignature(`${'a'.repeat(100)}y`)).to.throw(DbusWireError, /too deep/);
    expect(() => parseSignature('(ss')).to.throw(DbusWireError, /unclosed/);
    expect(() => parseSignature('z')).to.throw(DbusWireError, /unknown type/);
  });

  // rx~systemd-events~1
  it('refuses signatures the D-Bus specification forbids, so a 40-byte header of `a()` cannot loop the reader', () => {
    for (const forbidden of ['a()', 'a{}', '()', '{sv}', 'a{vs}', 'a{s}', 'a{sss}', 'a(y', 'y)', `${'('.repeat(33)}y${')'.repeat(33)}`, 's'.repeat(256)]) {
      expect(() => parseSignature(forbidden), forbidden).to.throw(DbusWireError);
    }
    expect(parseSignature('a{sv}(yv)av')).to.have.length(3);
    // A signal whose one header field is a variant `a()` of 4 bytes: empty structs, each of no bytes.
    const header = Buffer.alloc(40);
    header.write('l', 0, 'latin1');
    header.writeUInt8(4, 1);
    header.writeUInt8(1, 3);
    header.writeUInt32LE(1, 8);
    header.writeUInt32LE(20, 12);
    header.writeUInt8(1, 16);
    header.writeUInt8(3, 17);
    header.write('a()', 18, 'latin1');
    header.writeUInt32LE(4, 24);
    expect(() => splitMessages(header)).to.throw(DbusWireError, /empty '\(\)'/);
  });

  // rx~systemd-events~1
  it('ends on every one of 20 000 random mutations of real signals, with its messages or a DbusWireError', function () {
    this.timeout(60_000);
    let seed = 0x5eed;
    const random = (below: number) => {
      seed = (seed * 1_103_515_245 + 12_345) >>> 0;
      return (seed >>> 8) % below;
    };
    const originals = [true, false].map((little) =>
      propertiesChanged(
        WEB,
        'org.freedesktop.systemd1.Unit',
        [
          ['ActiveState', 's', 'active'],
          ['Names', 'as', ['web.service']],
          ['ExecMainStatus', 'i', 1],
          ['InactiveExitTimestampMonotonic', 't', 5n],
        ],
        ['Conditions'],
        little,
      ),
    );
    const typeBytes = Buffer.from('ay(){}vsgoaaa\0\xff');
    let read = 0;
    let refused = 0;
    for (let round = 0; round < 20_000; round++) {
      const bytes = Buffer.from(originals[round % 2]);
      for (let edits = 1 + random(4); edits > 0; edits--) {
        const at = random(bytes.length);
        bytes[at] = random(2) ? typeBytes[random(typeBytes.length)] : random(256);
      }
      const input = random(8) === 0 ? bytes.subarray(0, random(bytes.length)) : bytes;
      try {
        for (const message of splitMessages(input).messages) readBody(message);
        read++;
      } catch (error) {
        expect(error, String(error)).to.be.instanceOf(DbusWireError);
        refused++;
      }
    }
    expect(read + refused).to.equal(20_000);
    expect(refused).to.be.greaterThan(0);
    expect(read).to.be.greaterThan(0);
  });

  // rx~systemd-events~1
  it('escapes a unit name into its object path as systemd does', () => {
    expect(unitPath('getty@tty1.service')).to.equal('/org/freedesktop/systemd1/unit/getty_40tty1_2eservice');
    expect(unitPath('2fast.service')).to.equal('/org/freedesktop/systemd1/unit/_32fast_2eservice');
    expect(unitPath('a-b_c.service')).to.equal('/org/freedesktop/systemd1/unit/a_2db_5fc_2eservice');
  });

  // rx~systemd-events~1
  it('authenticates, then passes on the wanted units’ changes only; bytes that are no message end the stream with a clear error', () => {
    const written: string[] = [];
    const replies = new Subject<Buffer>();
    const news: unknown[] = [];
    let failure: Error | undefined;
    unitNews(
      (input$) => {
        input$.subscribe((text) => written.push(text));
        return replies;
      },
      (path) => path === WEB,
    ).subscribe({ next: (n) => news.push(n), error: (err) => (failure = err) });
    expect(written[0]).to.match(/^\0AUTH EXTERNAL [0-9a-f]+\r\n$/);
    const signal = propertiesChanged(
      WEB,
      'org.freedesktop.systemd1.Unit',
      [
        ['ActiveState', 's', 'active'],
        ['SubState', 's', 'running'],
        ['Id', 's', 'web.service'],
      ],
      ['ExecMainStatus'],
    );
    const other = propertiesChanged(unitPath('other.service'), 'org.freedesktop.systemd1.Unit', [['ActiveState', 's', 'failed']]);
    replies.next(Buffer.concat([Buffer.from('OK 0123456789abcdef\r\n'), other, signal.subarray(0, 30)]));
    expect(written[1]).to.equal('BEGIN\r\n');
    replies.next(signal.subarray(30));
    expect(news).to.deep.equal([{ kind: 'up' }, { kind: 'unit', path: WEB, props: { ActiveState: 'active', SubState: 'running' }, stale: true }]);
    replies.next(Buffer.from('garbage that is not a message'));
    expect(failure?.message).to.match(/unreadable bytes on the bus/);
  });

  // rx~systemd-events~1
  it('ends with a clear error when the bus refuses the authentication', () => {
    let failure: Error | undefined;
    unitNews(
      () => of(Buffer.from('REJECTED EXTERNAL\r\n')),
      () => true,
    ).subscribe({ error: (err) => (failure = err) });
    expect(failure?.message).to.equal('the bus refused the authentication (REJECTED EXTERNAL)');
  });
});

describe('the systemd runtime: unit states', () => {
  const state = (props: UnitProps) => formatState(unitExecutionState(props));

  // rx~systemd-states~1
  it('maps the unit state as the released proposal does, an active unit of any kind being Running', () => {
    expect(state({ ActiveState: 'active', SubState: 'running' })).to.equal('Running(Ok)');
    expect(state({ ActiveState: 'active', SubState: 'exited' })).to.equal('Running(Ok): exited');
    expect(state({ ActiveState: 'inactive', SubState: 'dead' })).to.equal('Succeeded(Ok)');
    expect(state({ ActiveState: 'inactive', SubState: 'dead', ExecMainCode: 1, ExecMainStatus: 0 })).to.equal('Succeeded(Ok)');
    expect(state({ ActiveState: 'inactive', SubState: 'dead', ExecMainCode: 1, ExecMainStatus: 3 })).to.equal('Failed(ExecFailed): Exit code: 3');
    expect(unitExecutionState({ ActiveState: 'inactive', ExecMainCode: 1, ExecMainStatus: 3 }).exitCode).to.equal(3);
    // Stopped by systemd with its signal: a clean end, not an exit code of 15.
    expect(state({ ActiveState: 'inactive', SubState: 'dead', ExecMainCode: 2, ExecMainStatus: 15 })).to.equal('Succeeded(Ok)');
    expect(state({ ActiveState: 'failed', SubState: 'failed', ExecMainCode: 2, ExecMainStatus: 9 })).to.equal('Failed(ExecFailed): Service failed: failed');
    expect(state({ ActiveState: 'activating', SubState: 'start-pre' })).to.equal('Pending(Starting): start-pre');
    expect(state({ ActiveState: 'deactivating', SubState: 'stop-sigterm' })).to.equal('Stopping(Stopping): stop-sigterm');
    expect(state({ ActiveState: 'maintenance' })).to.equal('Failed(Unknown): maintenance');
  });

  // rx~systemd-states~1
  it('reads systemctl show of several units, each by its Id', () => {
    const shown = parseShow(
      'Id=a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nExecMainCode=0\nExecMainStatus=0\nActiveEnterTimestampMonotonic=5000\n\nId=b.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nExecMainStatus=x\n',
    );
    expect(shown.get('a.service')).to.deep.equal({
      LoadState: 'loaded',
      ActiveState: 'active',
      SubState: 'running',
      ExecMainCode: 0,
      ExecMainStatus: 0,
      ActiveEnterTimestampMonotonic: 5000,
    });
    expect(shown.get('b.service')).to.deep.equal({ LoadState: 'not-found', ActiveState: 'inactive', SubState: 'dead' });
  });

  // rx~systemd-events~1
  it('a show does not undo news heard while it ran; news after it override it', () => {
    let view = learn(EMPTY_VIEW, { ActiveState: 'active', SubState: 'running' }, 1);
    view = learn(view, { ActiveState: 'failed', SubState: 'failed' }, 3);
    view = learn(view, { ActiveState: 'active', SubState: 'running', ExecMainCode: 0 }, 2);
    expect(view.props).to.deep.equal({ ActiveState: 'failed', SubState: 'failed', ExecMainCode: 0 });
    expect(learn(view, { ActiveState: 'inactive' }, 4).props.ActiveState).to.equal('inactive');
  });

  // rx~systemd-restart-rule~1
  it('a unit became active within 3 s only when systemd says when, and it is active', () => {
    expect(activeSince({ ActiveState: 'active', ActiveEnterTimestampMonotonic: 10_000_000 }, 12_000_000, 3_000_000)).to.equal(true);
    expect(activeSince({ ActiveState: 'active', ActiveEnterTimestampMonotonic: 10_000_000 }, 13_500_000, 3_000_000)).to.equal(false);
    expect(activeSince({ ActiveState: 'failed', ActiveEnterTimestampMonotonic: 10_000_000 }, 11_000_000, 3_000_000)).to.equal(false);
    expect(activeSince({ ActiveState: 'active', ActiveEnterTimestampMonotonic: 0 }, 1, 3_000_000)).to.equal(false);
  });
});

describe('the systemd runtime: the watch of its units (virtual time)', () => {
  const timing = { verifyMs: 30_000, pollMs: 500, retryMs: 1000, maxRetryMs: 60_000 };
  const props = (ActiveState: string): UnitProps => ({ ActiveState, SubState: ActiveState === 'active' ? 'running' : ActiveState });

  // rx~systemd-events~1
  it('follows the news; a show answered after news does not undo them; while the news come, all units are shown at once and every 30 s', () => {
    const scheduler = testScheduler();
    const shows: Array<[number, string]> = [];
    scheduler.run(({ cold, expectObservable }) => {
      let truth = 'active';
      const watch = new UnitWatch(
        {
          news: () =>
            cold<BusNews>('u 9ms n', {
              u: { kind: 'up' },
              n: { kind: 'unit', path: WEB, props: props('failed'), stale: false },
            }).pipe(
              tap((n) => {
                if (n.kind === 'unit') truth = 'failed';
              }),
            ),
          show: (units) =>
            defer(() => {
              shows.push([scheduler.now(), units.join()]);
              return of(new Map(units.map((u) => [u, props(truth)])));
            }).pipe(delay(20)),
        },
        timing,
      );
      // Two units watched: "all at once" is one show that names both.
      const states$ = merge(
        watch.watch('web.service').pipe(
          map((p) => p.ActiveState),
          distinctUntilChanged(),
        ),
        watch.watch('db.service').pipe(ignoreElements()),
      );
      expectObservable(states$, '^ 40s !').toBe('10ms f', { f: 'failed' });
    });
    expect(
      shows.filter(([at]) => at === 0),
      "each unit's first show, and all units in one as the news come up",
    ).to.deep.equal([
      [0, 'web.service'],
      [0, 'db.service'],
      [0, 'web.service,db.service'],
    ]);
    expect(
      shows.filter(([at]) => at > 0),
      'then one show of all every 30 s while the news come',
    ).to.deep.equal([[30_000, 'web.service,db.service']]);
  });

  // rx~systemd-events~1
  it('shows the news of units it does not know as stale: a show of that unit fills them in', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, expectObservable }) => {
      const watch = new UnitWatch(
        {
          news: () => cold<BusNews>('u 4ms n', { u: { kind: 'up' }, n: { kind: 'unit', path: WEB, props: {}, stale: true } }),
          show: () => defer(() => of(new Map([['web.service', props(scheduler.now() < 5 ? 'active' : 'inactive')]]))),
        },
        timing,
      );
      expectObservable(
        watch.watch('web.service').pipe(
          map((p) => p.ActiveState),
          distinctUntilChanged(),
        ),
        '^ 1s !',
      ).toBe('a 4ms i', { a: 'active', i: 'inactive' });
    });
  });

  // rx~systemd-events~1
  it('while the news stream is down, polls all watched units in one show every 500 ms, and opens it again after 1 s, 2 s, 4 s', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, expectObservable }) => {
      const opened: number[] = [];
      const shows: Array<[number, number]> = [];
      const watch = new UnitWatch(
        {
          news: () =>
            defer(() => {
              opened.push(scheduler.now());
              return throwError(() => new Error('no bridge'));
            }),
          show: (units) =>
            defer(() => {
              shows.push([scheduler.now(), units.length]);
              return of(new Map(units.map((u) => [u, props('active')])));
            }),
        },
        timing,
      );
      const both$ = merge(watch.watch('a.service'), watch.watch('b.service')).pipe(ignoreElements());
      expectObservable(both$, '^ 7200ms !').toBe('');
      expectObservable(cold('7300ms x')).toBe('7300ms x');
      scheduler.flush();
      expect(opened).to.deep.equal([0, 1000, 3000, 7000]);
      expect(shows.slice(0, 4)).to.deep.equal([
        [0, 1],
        [0, 1],
        [500, 2],
        [1000, 2],
      ]);
      expect(shows.filter(([, n]) => n === 2)).to.have.length(14);
    });
  });
});
