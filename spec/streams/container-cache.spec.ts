import { expect } from 'chai';
import { Observable, Subscription, defer, throwError } from 'rxjs';
import type { Container } from '../../lib/podman/container-state.js';
import type { Snapshot } from '../../lib/ports.js';
import { containerCache } from '../../streams/container-cache.js';
import { testScheduler } from '../helpers/virtual-time.js';

/** A `podman ps` that takes `duration` frames and counts its calls. */
function fakePs(cold: (marbles: string, values?: Record<string, Container[]>) => Observable<Container[]>, duration = 10) {
  const counter = { calls: 0 };
  const list = () => defer(() => {
    counter.calls += 1;
    return cold(`${'-'.repeat(duration)}(a|)`, { a: [{ Id: `c${counter.calls}`, State: 'running' }] });
  });
  return { list, counter };
}

describe('containerCache (the PodmanCli container state cache)', () => {
  it('swdd~podmancli-container-state-cache-all-containers~1, swdd~podmancli-container-state-cache-refresh~1: polls at most about once a second however many watch', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list, counter } = fakePs(cold);
      const cache = containerCache(list);
      const subs: Subscription[] = [];
      for (let i = 0; i < 50; i++) subs.push(cache.fresh().subscribe());
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 10_000);
      flush();
      // the first watchers' refreshes coalesce into one or two polls, then one per second
      expect(counter.calls).to.be.within(10, 12);
    });
  });

  it('stops polling when nothing watches and starts again when something does', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list, counter } = fakePs(cold);
      const cache = containerCache(list);
      const sub = cache.fresh().subscribe();
      scheduler.schedule(() => sub.unsubscribe(), 3_500);
      scheduler.schedule(() => expect(counter.calls).to.equal(4), 9_000);
      flush();
      const again = cache.fresh().subscribe();
      expect(counter.calls).to.equal(5);
      again.unsubscribe();
    });
  });

  it('swdd~podman-state-getter-reset-cache~1, swdd~podman-kube-state-getter-reset-cache~1: a new watcher triggers a poll and never sees a snapshot taken before it started', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list } = fakePs(cold);
      const cache = containerCache(list);
      const first: Array<[number, string]> = [];
      const second: Array<[number, string]> = [];
      const record = (into: Array<[number, string]>) => (s: Snapshot) => into.push([scheduler.now(), s.containers![0].Id]);
      const subs = [cache.fresh().subscribe(record(first))];
      // The second watcher comes at 500, while the cache holds c1 from 10: it must get c2, polled at once.
      scheduler.schedule(() => subs.push(cache.fresh().subscribe(record(second))), 500);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 3_000);
      flush();
      expect(first.slice(0, 2)).to.deep.equal([[10, 'c1'], [510, 'c2']]);
      expect(second[0]).to.deep.equal([510, 'c2']);
    });
  });

  it('a watcher that comes during a poll waits for the next one (the poll under way may not see its container)', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, flush }) => {
      const { list } = fakePs(cold, 100);
      const cache = containerCache(list);
      const subs = [cache.fresh().subscribe()];
      const seen: Array<[number, string]> = [];
      scheduler.schedule(() => subs.push(cache.fresh().subscribe((s) => seen.push([scheduler.now(), s.containers![0].Id]))), 50);
      scheduler.schedule(() => subs.forEach((s) => s.unsubscribe()), 500);
      flush();
      expect(seen[0]).to.deep.equal([200, 'c2']);
    });
  });

  it('swdd~podman-state-getter-returns-unknown-state~1: a failed poll gives a snapshot without containers, saying why (issue 14)', () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush }) => {
      const cache = containerCache(() => throwError(() => new Error('podman: not found')));
      const seen: Snapshot[] = [];
      const sub = cache.fresh().subscribe((s) => seen.push(s));
      scheduler.schedule(() => sub.unsubscribe(), 1_500);
      flush();
      expect(seen).to.deep.equal([{ poll: 1, error: 'podman: not found' }, { poll: 2, error: 'podman: not found' }]);
    });
  });
});
