import { expect } from 'chai';
import { type Observable, type Subscription, asyncScheduler, defer, finalize, throwError } from 'rxjs';
import type { Container, ContainerChange, ContainerEvent, Snapshot } from '../../lib/ports.js';
import { containerCache } from '../../lib/runtimes/containers/container-cache.js';
import type { Trace } from '../../streams/trace.js';
import { testScheduler } from '../helpers/virtual-time.js';

/** A cache of Podman's containers on the async scheduler: virtual in the marbles' run(). */
const cacheOf = (list: () => Observable<Container[]>, events$?: Observable<ContainerEvent>, options: Partial<Parameters<typeof containerCache>[2]> = {}) =>
  containerCache(list, events$, { scheduler: asyncScheduler, engine: { name: 'Podman', stage: 'podman.cache' }, ...options });

/** A `podman ps` that takes `duration` frames and counts its calls. */
function fakePs(cold: (marbles: string, values?: Record<string, Container[]>) => Observable<Container[]>, duration = 10) {
  const counter = { calls: 0 };
  const list = () =>
    defer(() => {
      counter.calls += 1;
      return cold(`${'-'.repeat(duration)}(a|)`, { a: [{ id: `c${counter.calls}`, state: 'running' }] });
    });
  return { list, counter };
}

describe('containerCache (the Cli container state cache)', () => {
  // swdd~podmancli-container-state-cache-all-containers~1, swdd~podmancli-container-state-cache-refresh~1
  it('polls at most about once a second however many watch', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list, counter } = fakePs(cold);
      const cache = cacheOf(list);
      const subs: Subscription[] = [];
      const heard = Array.from({ length: 50 }, () => 0);
      for (let i = 0; i < 50; i++) subs.push(cache.fresh().subscribe(() => (heard[i] += 1)));
      // the first watchers' refreshes coalesce into one or two polls, then one per second
      scheduler.schedule(() => expect(counter.calls).to.be.within(10, 12), 10_000);
      // and every watcher is told each of them: the polls are shared, not one per watcher
      scheduler.schedule(() => expect(Math.min(...heard), 'snapshots the least told watcher heard').to.be.at.least(9), 10_000);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 10_000);
      flush();
    });
    // One watcher alone is polled for as often.
    const once = testScheduler();
    once.run(({ cold, flush }) => {
      const { list, counter } = fakePs(cold);
      const alone = cacheOf(list).fresh().subscribe();
      once.schedule(() => expect(counter.calls).to.be.within(10, 12), 10_000);
      once.schedule(() => alone.unsubscribe(), 10_000);
      flush();
    });
  });

  it('stops polling 10 s after nothing watches and starts again when something does', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list, counter } = fakePs(cold);
      const cache = cacheOf(list);
      const sub = cache.fresh().subscribe();
      scheduler.schedule(() => sub.unsubscribe(), 3_500);
      // Polls at 0, 1 000, …, 13 000: ten more after the watcher left at 3 500, then none.
      scheduler.schedule(() => expect(counter.calls).to.equal(14), 13_500);
      scheduler.schedule(() => expect(counter.calls).to.equal(14), 30_000);
      flush();
      const again = cache.fresh().subscribe();
      expect(counter.calls).to.equal(15);
      again.unsubscribe();
    });
  });

  // swdd~podman-state-getter-reset-cache~1, swdd~podman-kube-state-getter-reset-cache~1
  it('a new watcher triggers a poll and never sees a snapshot taken before it started', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list } = fakePs(cold);
      const cache = cacheOf(list);
      const first: Array<[number, string]> = [];
      const second: Array<[number, string]> = [];
      const record = (into: Array<[number, string]>) => (s: Snapshot) => into.push([scheduler.now(), [...s.containers!.values()][0].id]);
      const subs = [cache.fresh().subscribe(record(first))];
      // The second watcher comes at 500, while the cache holds c1 from 10: it must get c2, polled at once.
      scheduler.schedule(() => subs.push(cache.fresh().subscribe(record(second))), 500);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 3_000);
      flush();
      expect(first.slice(0, 2)).to.deep.equal([
        [10, 'c1'],
        [510, 'c2'],
      ]);
      expect(second[0]).to.deep.equal([510, 'c2']);
    });
  });

  it('a watcher that comes during a poll waits for the next one (the poll under way may not see its container)', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list } = fakePs(cold, 100);
      const cache = cacheOf(list);
      const subs = [cache.fresh().subscribe()];
      const seen: Array<[number, string]> = [];
      scheduler.schedule(() => subs.push(cache.fresh().subscribe((s) => seen.push([scheduler.now(), [...s.containers!.values()][0].id]))), 50);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 500);
      flush();
      expect(seen[0]).to.deep.equal([200, 'c2']);
    });
  });

  // swdd~podman-state-getter-returns-unknown-state~1
  it('a failed poll gives a snapshot without containers, saying why', () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush }) => {
      const cache = cacheOf(() => throwError(() => new Error('podman: not found')));
      const seen: Snapshot[] = [];
      const sub = cache.fresh().subscribe((s) => seen.push(s));
      scheduler.schedule(() => sub.unsubscribe(), 1_500);
      flush();
      expect(seen).to.deep.equal([
        { poll: 1, error: 'podman: not found', heardAt: 0 },
        { poll: 2, error: 'podman: not found', heardAt: 1000 },
      ]);
    });
  });
});

describe("containerCache kept by Podman's events", () => {
  /** A `podman ps` of 10 frames that shows `truth` as it is when it starts. */
  const podman = (cold: (m: string, v?: Record<string, Container[]>) => Observable<Container[]>, truth: () => Container[]) => {
    const counter = { calls: 0 };
    return {
      counter,
      list: () =>
        defer(() => {
          counter.calls += 1;
          return cold('----------(a|)', { a: truth() });
        }),
    };
  };
  const state = (s: Snapshot | undefined) =>
    s?.containers
      ? [...s.containers.values()].map((c) => `${c.id}:${c.state}${c.state === 'exited' ? `(${c.exitCode})` : ''}`).join(',')
      : (s?.error ?? 'none');

  it("a workload's restart (its watcher leaves, the next comes) keeps the one event stream; it ends 10 s after the last watcher", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const { list } = podman(cold, () => [{ id: 'a', state: 'running' }]);
      const source$ = hot<ContainerEvent>('');
      const streams = { started: 0, ended: 0 };
      const events$ = defer(() => {
        streams.started += 1;
        return source$.pipe(finalize(() => (streams.ended += 1)));
      });
      const cache = cacheOf(list, events$);
      // A crash loop: each cycle's watcher lives 200 ms, the next comes 50 ms later.
      for (let cycle = 0; cycle < 20; cycle++) {
        scheduler.schedule(() => {
          const sub = cache.fresh().subscribe();
          scheduler.schedule(() => sub.unsubscribe(), 200);
        }, cycle * 250);
      }
      scheduler.schedule(() => expect(streams).to.deep.equal({ started: 1, ended: 0 }), 5_000 + 9_000);
      scheduler.schedule(() => expect(streams).to.deep.equal({ started: 1, ended: 1 }), 5_000 + 10_000);
      flush();
    });
  });

  it('a cache its watchers left stops following at once when the run ends, not 10 s later', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const { list } = podman(cold, () => [{ id: 'a', state: 'running' }]);
      const source$ = hot<ContainerEvent>('');
      const streams = { started: 0, ended: 0 };
      const events$ = defer(() => {
        streams.started += 1;
        return source$.pipe(finalize(() => (streams.ended += 1)));
      });
      const ended$ = hot<void>('3000ms e');
      const cache = cacheOf(list, events$, { ended$ });
      const sub = cache.fresh().subscribe();
      scheduler.schedule(() => sub.unsubscribe(), 1000);
      scheduler.schedule(() => expect(streams).to.deep.equal({ started: 1, ended: 0 }), 2999);
      scheduler.schedule(() => expect(streams).to.deep.equal({ started: 1, ended: 1 }), 3001);
      flush();
    });
  });

  it('a died event updates the snapshot at once with its exit code; podman ps only verifies, every 10 s', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const { list, counter } = podman(cold, () => [{ id: 'a', state: 'running' }]);
      const events$ = hot<ContainerEvent>('500ms d', { d: { id: 'a', change: 'exited', exitCode: 3 } });
      const seen: Array<[number, string]> = [];
      const sub = cacheOf(list, events$)
        .fresh()
        .subscribe((s) => seen.push([scheduler.now(), state(s)]));
      scheduler.schedule(() => sub.unsubscribe(), 30_500);
      flush();
      expect(seen.slice(0, 2)).to.deep.equal([
        [10, 'a:running'],
        [500, 'a:exited(3)'],
      ]);
      expect(counter.calls, 'the first poll, its verification, and one each 10 s').to.be.within(3, 5);
    });
  });

  it('falls back to one poll a second at once when the stream ends, starts it again after a second, and returns to events', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list, counter } = podman(cold, () => [{ id: 'a', state: 'running' }]);
      let starts = 0;
      // The first stream dies at 2 s; the second lives.
      const events$ = defer(() => (++starts === 1 ? cold<ContainerEvent>('2000ms #') : cold<ContainerEvent>('-')));
      const sub = cacheOf(list, events$).fresh().subscribe();
      const callsAt: Record<number, number> = {};
      for (const t of [1_999, 3_001, 13_001, 23_001]) scheduler.schedule(() => (callsAt[t] = counter.calls), t);
      scheduler.schedule(() => sub.unsubscribe(), 23_500);
      flush();
      expect(starts, 'started again after it ended').to.equal(2);
      expect(callsAt[1_999], "while healthy: the first watcher's poll").to.equal(1);
      expect(callsAt[3_001] - callsAt[1_999], 'the fallback polls at once (2 s), the restarted stream is verified at once (3 s)').to.equal(2);
      expect(callsAt[23_001] - callsAt[13_001], 'back on events: one verification per 10 s').to.equal(1);
    });
  });

  it("events of containers it does not show (the host's other containers churning) cause no poll and no snapshot; a `stopped` container whose died event came is exited", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      let truth: Container[] = [{ id: 'a', state: 'running' }];
      const { list, counter } = podman(cold, () => truth);
      scheduler.schedule(() => (truth = [{ id: 'a', state: 'stopped', exitCode: 0 }]), 999);
      // 200 containers that are not the agent's come and go while `a` dies.
      const noise: Record<string, ContainerEvent> = { d: { id: 'a', change: 'exited', exitCode: 7 } };
      const changes: ContainerChange[] = ['created', 'initialized', 'started', 'exited', 'exited', 'removed'];
      let marbles = '1000ms d';
      for (let i = 0; i < 200; i++) {
        changes.forEach((change, j) => (noise[`${String.fromCharCode(0x100 + i * 6 + j)}`] = { id: `other${i}`, change, exitCode: j === 3 ? 0 : undefined }));
        marbles += ` 9ms (${changes.map((_, j) => String.fromCharCode(0x100 + i * 6 + j)).join('')})`;
      }
      const events$ = hot<ContainerEvent>(marbles, noise);
      const seen: string[] = [];
      const sub = cacheOf(list, events$)
        .fresh()
        .subscribe((s) => seen.push(state(s)));
      scheduler.schedule(() => sub.unsubscribe(), 9_000);
      flush();
      expect(seen).to.deep.equal(['a:running', 'a:exited(7)']);
      expect(counter.calls, "the first watcher's poll and its verification, none for the noise").to.be.at.most(2);
    });
  });

  // swdd~podmancli-uses-container-state-cache~1
  it('an event wakes only the watchers that name its container (and those that name none); every poll reaches all', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      let truth: Container[] = [
        { id: 'a', state: 'running' },
        { id: 'b', state: 'running' },
      ];
      const { list } = podman(cold, () => truth);
      scheduler.schedule(() => (truth = [truth[0], { id: 'b', state: 'exited', exitCode: 2 }]), 300);
      // Three events of `b` after the first poll, then a verification at 10 s.
      const events$ = hot<ContainerEvent>('100ms x 99ms y 99ms z', {
        x: { id: 'b', change: 'exited', exitCode: 1 },
        y: { id: 'b', change: 'started' },
        z: { id: 'b', change: 'exited', exitCode: 2 },
      });
      const cache = cacheOf(list, events$);
      const heard = { a: [] as string[], b: [] as string[], all: [] as string[] };
      const subs = [
        cache.fresh(['a']).subscribe((s) => heard.a.push(state(s))),
        cache.fresh(['b']).subscribe((s) => heard.b.push(state(s))),
        cache.fresh().subscribe((s) => heard.all.push(state(s))),
      ];
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 10_500);
      flush();
      const [poll, verified] = ['a:running,b:running', 'a:running,b:exited(2)'];
      const events = ['a:running,b:exited(1)', 'a:running,b:running', verified];
      expect(heard.b).to.deep.equal([poll, ...events, verified]);
      expect(heard.all).to.deep.equal([poll, ...events, verified]);
      // `a` came first: the polls its own and the others' start asked for, and the verification; none of b's events.
      expect(heard.a).to.deep.equal([poll, poll, verified]);
    });
  });

  // swdd~podman-state-getter-returns-unknown-state~1
  it("after a failed poll a watcher hears the next event of any container (its picture again), then only its own containers' events", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      let calls = 0;
      const list = () =>
        defer(() => {
          calls += 1;
          return calls === 2 ? cold<Container[]>('----------#', {}, new Error('podman: busy')) : cold('----------(a|)', { a: [{ id: 'a', state: 'running' }] });
        });
      const told = { names: ['n'], labels: {}, pod: '' };
      const events$ = hot<ContainerEvent>('200ms x 99ms y', {
        x: { id: 'b', change: 'started', container: told },
        y: { id: 'b', change: 'exited', exitCode: 0 },
      });
      const cache = cacheOf(list, events$);
      const heard: string[] = [];
      const subs = [cache.fresh(['a']).subscribe((s) => heard.push(state(s)))];
      // A second watcher at 100 asks for the poll that fails.
      scheduler.schedule(() => subs.push(cache.fresh().subscribe()), 100);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 500);
      flush();
      expect(heard).to.deep.equal(['a:running', 'podman: busy', 'a:running,b:running']);
    });
  });

  it("a poll that still sees `running` after conmon told the exit does not undo it; Podman's own died event confirms it", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const { list } = podman(cold, () => [{ id: 'a', state: 'running' }]);
      const exits$ = hot<ContainerEvent>('100ms x', { x: { id: 'a', change: 'exited', exitCode: 3 } });
      const events$ = hot<ContainerEvent>('400ms d', { d: { id: 'a', change: 'exited', exitCode: 3 } });
      const cache = cacheOf(list, events$, { early$: exits$ });
      const seen: string[] = [];
      const subs = [cache.fresh().subscribe((s) => seen.push(state(s)))];
      // A new watcher at 200 makes the cache poll: Podman's database still says running.
      scheduler.schedule(() => subs.push(cache.fresh().subscribe()), 200);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 1_000);
      flush();
      expect(seen.filter((s, i) => s !== seen[i - 1])).to.deep.equal(['a:running', 'a:exited(3)']);
    });
  });

  it('a watcher never gets a picture older than itself: an event on another container before its own poll is not fresh for it', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      let truth: Container[] = [
        { id: 'a', state: 'exited', exitCode: 0 },
        { id: 'b', state: 'exited', exitCode: 0 },
      ];
      const { list } = podman(cold, () => truth);
      const cache = cacheOf(list, hot<ContainerEvent>('500ms s', { s: { id: 'b', change: 'started' } }));
      const subs = [cache.fresh().subscribe()];
      // `a` is started again at 495 (as a reused container is) and its checker subscribes then.
      const seen: Array<[number, string]> = [];
      scheduler.schedule(() => {
        truth = [{ id: 'a', state: 'running' }, truth[1]];
        subs.push(cache.fresh().subscribe((s) => seen.push([scheduler.now(), state(s)])));
      }, 495);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 600);
      flush();
      expect(seen[0], 'not the event at 500 with a stale a').to.deep.equal([505, 'a:running,b:running']);
    });
  });

  // swdd~podman-state-getter-reset-cache~1
  it("in a burst, a new workload's watcher hears its container's own start event instead of asking for a poll; news older than the watcher is not taken", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const told = { names: ['n'], labels: {}, pod: '' };
      let truth: Container[] = [{ id: 'a', state: 'running' }];
      const { list, counter } = podman(cold, () => truth);
      const events$ = hot<ContainerEvent>('500ms s 49ms b', {
        s: { id: 'new', change: 'started', container: told },
        b: { id: 'a', change: 'exited', exitCode: 0 },
      });
      const cache = cacheOf(list, events$);
      const subs = [cache.fresh().subscribe()];
      const seen: Array<[number, string]> = [];
      const without: Array<[number, string]> = [];
      let callsBefore = 0;
      scheduler.schedule(() => {
        callsBefore = counter.calls;
        truth = [...truth, { id: 'new', state: 'running' }];
        // `podman run` returned: a kube checker subscribes (without ids: its poll starts), then the workload's
        // checker with its container's id: a poll is under way, so it waits up to NEWS_WAIT_MS for its news.
        subs.push(cache.fresh().subscribe((s) => without.push([scheduler.now(), state(s)])));
        subs.push(cache.fresh(['new']).subscribe((s) => seen.push([scheduler.now(), state(s)])));
      }, 495);
      // A checker that comes after the start event was heard (the replayed picture shows it) waits for its poll.
      const late: Array<[number, string]> = [];
      scheduler.schedule(() => subs.push(cache.fresh(['new']).subscribe((s) => late.push([scheduler.now(), state(s)]))), 520);
      let callsThen = 0;
      scheduler.schedule(() => {
        callsThen = counter.calls;
        subs.forEach((s) => s.unsubscribe());
      }, 1_000);
      flush();
      expect(seen[0], 'at its start event, not after the next poll (515)').to.deep.equal([500, 'a:running,new:running']);
      expect(without[0]).to.deep.equal([505, 'a:running,new:running']);
      expect(late[0], 'not the replayed picture: its own poll, asked at once (none was under way)').to.deep.equal([530, 'a:running,new:running']);
      expect(callsThen - callsBefore, 'the kube-like watcher’s poll and the late one’s: none for the watcher its event answered').to.equal(2);
    });
  });

  // swdd~podman-state-getter-reset-cache~1
  it('a watcher given the start its create made hears it at once and asks for no poll; one whose container ended before its create returned is answered by a poll', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const told = { names: ['n'], labels: {} };
      let truth: Container[] = [{ id: 'a', state: 'running' }];
      const { list, counter } = podman(cold, () => truth);
      // Podman's stream is up and says nothing meanwhile; conmon tells `quick`'s exit at 195, before its create returned.
      const early$ = hot<ContainerEvent>('195ms x', { x: { id: 'quick', change: 'exited', exitCode: 0, at: 195 } });
      const cache = cacheOf(list, hot<ContainerEvent>('-'), { early$ });
      const subs = [cache.fresh().subscribe()];
      const seen: Array<[number, string]> = [];
      const quick: Array<[number, string]> = [];
      let callsBefore = 0;
      scheduler.schedule(() => {
        callsBefore = counter.calls;
        truth = [...truth, { id: 'new', state: 'running' }];
        subs.push(
          cache.fresh(['new'], { id: 'new', change: 'started', at: 90, own: true, container: told }).subscribe((s) => seen.push([scheduler.now(), state(s)])),
        );
      }, 100);
      let callsAfter = 0;
      scheduler.schedule(() => (callsAfter = counter.calls), 190);
      scheduler.schedule(() => {
        truth = [...truth, { id: 'quick', state: 'exited', exitCode: 0 }];
        subs.push(
          cache
            .fresh(['quick'], { id: 'quick', change: 'started', at: 190, own: true, container: told })
            .subscribe((s) => quick.push([scheduler.now(), state(s)])),
        );
      }, 200);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 1_000);
      flush();
      expect(seen[0], 'at once, from the agent’s own word').to.deep.equal([100, 'a:running,new:running']);
      expect(callsAfter - callsBefore, 'no poll for it').to.equal(0);
      expect(quick[0], 'its start is older than its exit: a poll of its own (200–210) tells it').to.deep.equal([210, 'a:running,new:running,quick:exited(0)']);
    });
  });

  // swdd~podman-state-getter-reset-cache~1
  it("a watcher given its create's start while the cache's first poll runs takes that poll's picture, the start applied on top, and asks for no poll of its own", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const truth: Container[] = [{ id: 'a', state: 'running' }];
      const { list, counter } = podman(cold, () => truth);
      const cache = cacheOf(list, hot<ContainerEvent>('-'));
      // The first watcher starts the stream and its verifying poll (0–10), which cannot see `new`, made at 4.
      const subs = [cache.fresh().subscribe()];
      const seen: Array<[number, string]> = [];
      scheduler.schedule(() => {
        subs.push(
          cache
            .fresh(['new'], { id: 'new', change: 'started', at: 4, own: true, container: { names: ['n'], labels: {} } })
            .subscribe((s) => seen.push([scheduler.now(), state(s)])),
        );
      }, 5);
      let calls = 0;
      scheduler.schedule(() => (calls = counter.calls), 900);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 1_000);
      flush();
      expect(seen[0], "the poll's answer, with the agent's own word of the start").to.deep.equal([10, 'a:running,new:running']);
      expect(calls, 'the one poll of the stream’s start').to.equal(1);
    });
  });

  // swdd~podman-state-getter-reset-cache~1
  it("a watcher whose create returned does not take its container's late create and init events for news: it reports no state from before the start", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const told = { names: ['n'], labels: {}, pod: '' };
      let truth: Container[] = [{ id: 'a', state: 'running' }];
      const { list } = podman(cold, () => truth);
      const events$ = hot<ContainerEvent>('500ms c 9ms i 9ms s', {
        c: { id: 'new', change: 'created', container: told },
        i: { id: 'new', change: 'initialized', container: told },
        s: { id: 'new', change: 'started', container: told },
      });
      const cache = cacheOf(list, events$);
      // A burst: a kube-like watcher keeps a poll under way while the workload's checker waits for its news.
      const subs = [cache.fresh().subscribe()];
      const seen: Array<[number, string]> = [];
      scheduler.schedule(() => {
        truth = [...truth, { id: 'new', state: 'running' }];
        subs.push(cache.fresh().subscribe());
        subs.push(cache.fresh(['new']).subscribe((s) => seen.push([scheduler.now(), state(s)])));
      }, 495);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 1_000);
      flush();
      expect(seen[0], 'its start event (520): not the create (500) or init (510) before it').to.deep.equal([520, 'a:running,new:running']);
      expect(seen.map(([, s]) => s)).not.to.include('a:running,new:created');
    });
  });

  // swdd~podmancli-container-state-cache-refresh~1
  it('a container a poll shows stopped, its exit told by no event, is polled again after a second, not at the next verification', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      // It ended before the event stream was up: Podman's ps shows it stopped, then exited once cleaned up.
      let truth: Container[] = [{ id: 'a', state: 'stopped' }];
      scheduler.schedule(() => (truth = [{ id: 'a', state: 'exited', exitCode: 0 }]), 200);
      const list = () => defer(() => cold('-(a|)', { a: truth }));
      const seen: Array<[number, string]> = [];
      const sub = cacheOf(list, cold<ContainerEvent>('-'))
        .fresh()
        .subscribe((snapshot) => seen.push([scheduler.now(), state(snapshot)]));
      scheduler.schedule(() => sub.unsubscribe(), 5_000);
      flush();
      expect(seen).to.deep.equal([
        [1, 'a:stopped'],
        [1_002, 'a:exited(0)'],
      ]);
    });
  });

  it("an exit told early (conmon's exit file) is not undone by Podman's late start event of the same run", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const { list } = podman(cold, () => [{ id: 'a', state: 'running' }]);
      const exits$ = hot<ContainerEvent>('100ms x', { x: { id: 'a', change: 'exited', exitCode: 0 } });
      const events$ = hot<ContainerEvent>('150ms s 50ms d', { s: { id: 'a', change: 'started' }, d: { id: 'a', change: 'exited', exitCode: 0 } });
      const seen: string[] = [];
      const sub = cacheOf(list, events$, { early$: exits$ })
        .fresh()
        .subscribe((s) => seen.push(state(s)));
      scheduler.schedule(() => sub.unsubscribe(), 1_000);
      flush();
      expect(seen.filter((s, i) => s !== seen[i - 1])).to.deep.equal(['a:running', 'a:exited(0)']);
    });
  });

  it('a verification that finds an exit no event told takes the stream for stalled and starts it again', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      let truth: Container[] = [{ id: 'a', state: 'running' }];
      const { list } = podman(cold, () => truth);
      scheduler.schedule(() => (truth = [{ id: 'a', state: 'exited', exitCode: 1 }]), 5_000);
      let starts = 0;
      const events$ = defer(() => {
        starts += 1;
        return cold<ContainerEvent>('-');
      });
      const sub = cacheOf(list, events$).fresh().subscribe();
      scheduler.schedule(() => sub.unsubscribe(), 12_000);
      flush();
      expect(starts).to.equal(2);
    });
  });
});

describe('what the containerCache tells --debug and the metrics', () => {
  /** A Trace that keeps the notes of the stages it is asked for. */
  const notesOf = (stage: string) => {
    const notes: string[] = [];
    const trace = Object.assign(() => (x: never) => x, {
      note: (s: string, text: string) => s === stage && notes.push(text),
      enabled: (s: string) => s === stage,
    }) as unknown as Trace;
    return { notes, trace };
  };

  it("each snapshot says when the change it shows was heard: an event's own time, the arrival of one without, the poll's answer", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const list = () => cold('----------(a|)', { a: [{ id: 'a', state: 'running' }] as Container[] });
      const events$ = hot<ContainerEvent>('500ms d 99ms s', { d: { id: 'a', change: 'exited', exitCode: 3, at: 480 }, s: { id: 'a', change: 'started' } });
      const heard: Array<[number, number | undefined]> = [];
      const sub = cacheOf(list, events$)
        .fresh()
        .subscribe((s) => heard.push([scheduler.now(), s.heardAt]));
      scheduler.schedule(() => sub.unsubscribe(), 700);
      flush();
      expect(heard).to.deep.equal([
        [10, 10],
        [500, 480],
        [600, 600],
      ]);
    });
  });

  it('counts each start of `podman events` after the first in one run, and says so under --debug', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const list = () => cold('----------(a|)', { a: [] as Container[] });
      // The stream ends after 2 s each time; it is started again a second later.
      const events$ = cold<ContainerEvent>('2000ms |');
      const restarts = { count: 0 };
      const { notes, trace } = notesOf('podman.cache');
      const sub = cacheOf(list, events$, { trace, eventsRestarted: () => (restarts.count += 1) })
        .fresh()
        .subscribe();
      // Starts at 0, 3 000 and 6 000 (looked at before the cache stops following, 10 s after its watcher left).
      scheduler.schedule(() => {
        expect(restarts.count).to.equal(2);
        sub.unsubscribe();
      }, 6_500);
      flush();
      expect(notes.filter((n) => n.startsWith('Following')).slice(0, 3)).to.deep.equal([
        "Following Podman's events.",
        "Following Podman's events again (start 2).",
        "Following Podman's events again (start 3).",
      ]);
    });
  });

  it('under --debug says each change of a container the watchers see, and what told it', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const list = () => cold('----------(a|)', { a: [{ id: 'a', names: ['db.1234.agent_A'], state: 'running' }] as Container[] });
      const exits$ = hot<ContainerEvent>('300ms x', { x: { id: 'a', change: 'exited', exitCode: 3 } });
      const events$ = hot<ContainerEvent>('400ms d 99ms r', { d: { id: 'a', change: 'exited', exitCode: 3 }, r: { id: 'a', change: 'removed' } });
      const { notes, trace } = notesOf('podman.cache');
      const sub = cacheOf(list, events$, { early$: exits$, trace }).fresh().subscribe();
      scheduler.schedule(() => sub.unsubscribe(), 1_000);
      flush();
      expect(notes.filter((n) => n.startsWith('db.')).slice(0, 3)).to.deep.equal([
        'db.1234.agent_A: running (poll)',
        "db.1234.agent_A: running → exited (3) (conmon's exit file)",
        "db.1234.agent_A: removed (Podman's removed event)",
      ]);
    });
  });

  it("a containerd cache speaks of containerd's events, under its own stage (containerd.cache)", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const list = () => cold('----------(a|)', { a: [{ id: 'a', names: ['db.1234.agent_A'], state: 'running' }] as Container[] });
      const events$ = hot<ContainerEvent>('400ms d', { d: { id: 'a', change: 'exited', exitCode: 137 } });
      // Every stage enabled: what is noted, and under which stage.
      const noted: Array<[string, string]> = [];
      const trace = Object.assign(() => (x: never) => x, {
        note: (stage: string, text: string) => noted.push([stage, text]),
        enabled: () => true,
      }) as unknown as Trace;
      const sub = cacheOf(list, events$, { trace, engine: { name: 'containerd', stage: 'containerd.cache' } })
        .fresh()
        .subscribe();
      scheduler.schedule(() => sub.unsubscribe(), 1_000);
      flush();
      expect(noted.filter(([stage]) => stage !== 'containerd.cache')).to.deep.equal([]);
      expect(noted.slice(0, 3).map(([, text]) => text)).to.deep.equal([
        "Following containerd's events.",
        'db.1234.agent_A: running (poll)',
        "db.1234.agent_A: running → exited (137) (containerd's exited event)",
      ]);
    });
  });
});
