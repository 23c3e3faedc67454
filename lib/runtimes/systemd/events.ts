// systemd's own news of its units: the manager's private bus (peer to peer, no bus daemon between), on which
// systemd sends every unit's PropertiesChanged unasked, reached through `systemd-stdio-bridge` (systemd's own
// bridge, what `systemctl --host` runs over ssh). One bridge for all the agent's units; a unit's change reaches
// the agent as systemd makes it.
import { Observable, Subject, startWith } from 'rxjs';
import { AUTH_BEGIN, type DbusMessage, DbusWireError, authRequest, readBody, splitMessages } from './dbus-wire.js';
import { type UnitProps, UNIT_PROPERTIES, propsOfSignal } from './unit-state.js';

/** The bridge's arguments that reach the system manager's private bus. */
export const BRIDGE_ARGS = ['--bus-path=unix:path=/run/systemd/private'];

const UNIT_OBJECTS = '/org/freedesktop/systemd1/unit/';
const SIGNAL = 4;
/** The authentication lines are short; a peer that says more is not systemd. */
const MAX_AUTH_BYTES = 4096;

export type BusNews =
  /** Authenticated: from now on every change is told. */
  | { readonly kind: 'up' }
  /** A unit's properties changed (`path`: its object); `stale`: some the agent reads changed without their values. */
  | { readonly kind: 'unit'; readonly path: string; readonly props: UnitProps; readonly stale: boolean };

/**
 * The news of the units whose object paths `wanted` takes, while subscribed, over the bus `open` reaches (it writes
 * what it is given, and emits what it reads); errors when the bus cannot be reached or the bridge ends (the caller
 * polls meanwhile and opens it again).
 */
export function unitNews(open: (input$: Observable<string>) => Observable<Buffer>, wanted: (path: string) => boolean): Observable<BusNews> {
  return new Observable<BusNews>((subscriber) => {
    const input$ = new Subject<string>();
    let authenticated = false;
    let pending: Buffer = Buffer.alloc(0);
    const reading = open(input$.pipe(startWith(authRequest(process.getuid?.() ?? 0)))).subscribe({
      next: (chunk) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        if (!authenticated) {
          const end = pending.indexOf('\r\n');
          if (end < 0) {
            if (pending.length > MAX_AUTH_BYTES) subscriber.error(new Error('no answer to the bus authentication'));
            return;
          }
          const answer = pending.toString('latin1', 0, end);
          if (!answer.startsWith('OK ')) return subscriber.error(new Error(`the bus refused the authentication (${answer.slice(0, 80)})`));
          input$.next(AUTH_BEGIN);
          authenticated = true;
          pending = pending.subarray(end + 2);
          subscriber.next({ kind: 'up' });
        }
        try {
          const { messages, used } = splitMessages(pending);
          pending = pending.subarray(used);
          for (const message of messages) {
            const news = unitChange(message, wanted);
            if (news) subscriber.next(news);
          }
        } catch (err) {
          subscriber.error(new Error(err instanceof DbusWireError ? `unreadable bytes on the bus (${err.message})` : (err as Error).message));
        }
      },
      error: (err) => subscriber.error(err),
      complete: () => subscriber.error(new Error('the bus bridge ended')),
    });
    return () => reading.unsubscribe();
  });
}

/** A unit's PropertiesChanged among the messages, read only when the unit is wanted. */
function unitChange(message: DbusMessage, wanted: (path: string) => boolean): BusNews | undefined {
  if (message.type !== SIGNAL || message.member !== 'PropertiesChanged' || message.interface !== 'org.freedesktop.DBus.Properties') return undefined;
  if (!message.path?.startsWith(UNIT_OBJECTS) || !wanted(message.path) || message.signature !== 'sa{sv}as') return undefined;
  const [, changed, invalidated] = readBody(message);
  const stale = Array.isArray(invalidated) && invalidated.some((name) => (UNIT_PROPERTIES as readonly unknown[]).includes(name));
  return { kind: 'unit', path: message.path, props: propsOfSignal(changed), stale };
}
