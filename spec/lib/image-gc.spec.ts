// The image collector's rules (lib/runtimes/containers/image-gc.ts) on a fake engine and a clock of the spec's own.
import { expect } from 'chai';
import { Subject, Subscription, VirtualAction, VirtualTimeScheduler, lastValueFrom, of, throwError } from 'rxjs';
import { ImageCollector, type ImageEngine, type ImageNames } from '../../lib/runtimes/containers/image-gc.js';
import { ImageRecord } from '../../lib/runtimes/containers/image-record.js';
import type { ImagePull } from '../../lib/runtimes/containers/images.js';

const pull = (image: string): ImagePull => ({ policy: 'missing', image, storage: [], args: [], present: [] });

/** An engine whose images are `state.images` (reference → the image it names) and whose removals go by id. */
function fake(refuse: Readonly<Record<string, string>> = {}, scheduler = new VirtualTimeScheduler(VirtualAction, 10_000), held = new Subscription()) {
  const removed: string[] = [];
  const state = { now: 0, inUse: new Set<string>(), images: new Map<string, ImageNames>() };
  scheduler.now = () => state.now;
  const engine: ImageEngine = {
    name: 'fake',
    imagesInUse: () => of(state.inUse),
    describe: (_storage, image) => of(state.images.get(image)),
    remove: (_storage, image, id) => {
      if (refuse[image]) return throwError(() => new Error(refuse[image]));
      removed.push(`${image} ${id}`);
      return of('');
    },
    storeFolder: () => throwError(() => new Error('no store')),
  };
  const record = new ImageRecord(undefined, 'fake');
  const gc = new ImageCollector(engine, record, { high: 85, low: 80, minAgeMs: 1000 }, {}, scheduler, held);
  /** The agent pulled `image`: it names the image `id` alone. */
  const pulled = (image: string, id = `id-${image}`) => {
    state.images.set(image, { id, names: [image] });
    return lastValueFrom(gc.pulled(pull(image)), { defaultValue: undefined });
  };
  return { gc, engine, record, removed, state, pulled };
}

const collect = (gc: ImageCollector) => lastValueFrom(gc.collect());

describe('the image collector (lib/runtimes/containers/image-gc.ts)', () => {
  // rx~image-gc~1
  it('removes the images it recorded, by the id pulled, once no container uses them and they are older than min_age, oldest first', async () => {
    const { gc, removed, state, pulled } = fake();
    await pulled('a');
    state.now = 10;
    await pulled('b');
    state.now = 20;
    await pulled('c');
    state.inUse = new Set(['id-b']);
    state.now = 500;
    expect(await collect(gc), 'none old enough').to.equal(0);
    state.now = 1015;
    expect(await collect(gc)).to.equal(1);
    expect(removed).to.deep.equal(['a id-a']);
    state.now = 5000;
    expect(await collect(gc)).to.equal(1);
    expect(removed, 'b is in use').to.deep.equal(['a id-a', 'c id-c']);
  });

  // rx~image-gc~1
  it("never removes a user's image under a reference the agent once pulled, nor one someone else gave a name: it forgets both", async () => {
    const { gc, record, removed, state, pulled } = fake();
    await pulled('app:1');
    await pulled('tool:1');
    // A user built or pulled a new image under the same tag, and tagged the agent's other image for themselves.
    state.images.set('app:1', { id: 'users-own', names: ['app:1'] });
    state.images.set('tool:1', { id: 'id-tool:1', names: ['tool:1', 'mine/tool:kept'] });
    state.now = 2000;
    expect(await collect(gc)).to.equal(0);
    expect(removed).to.deep.equal([]);
    expect(record.of('fake'), 'no longer the agent’s').to.deep.equal([]);
  });

  // rx~image-gc~1
  it("collects on the run's clock every half min_age while the record holds images, and its timer goes with the run", async () => {
    const scheduler = new VirtualTimeScheduler(VirtualAction, 10_000);
    const held = new Subscription();
    const { removed, state, pulled } = fake({}, scheduler, held);
    await pulled('a');
    // The clock is the scheduler's frame: the timer fires at 1 s and 2 s, and stops once the record is empty.
    scheduler.now = () => (state.now = scheduler.frame);
    scheduler.flush();
    expect(removed).to.deep.equal(['a id-a']);
    expect(scheduler.frame, 'no timer after the record emptied').to.be.below(3000);
    await pulled('b');
    held.unsubscribe();
    scheduler.flush();
    expect(removed, 'let go with the run: no more collections').to.deep.equal(['a id-a']);
  });

  // rx~image-gc~1
  it('records nothing for a pull whose reference names no image afterwards', async () => {
    const { gc, record } = fake();
    await lastValueFrom(gc.pulled(pull('vanished')), { defaultValue: undefined });
    expect(record.of('fake')).to.deep.equal([]);
  });

  // rx~image-gc~1
  it('records a pulled image though the work that pulled it let go while the engine was asked: the image is not left nobody’s', () => {
    const { gc, engine, record } = fake();
    // The engine answers once the work has let go.
    const answer = new Subject<ImageNames | undefined>();
    engine.describe = () => answer;
    const asked = gc.pulled(pull('app:2')).subscribe();
    asked.unsubscribe();
    answer.next({ id: 'id-app:2', names: ['app:2'] });
    answer.complete();
    expect(record.of('fake').map((r) => `${r.image} ${r.id}`)).to.deep.equal(['app:2 id-app:2']);
  });

  // rx~image-gc~1
  it('keeps an image a waiting workload wants until its create is done, or for an hour at most', async () => {
    const { gc, removed, state, pulled } = fake();
    await pulled('ahead');
    gc.want(pull('ahead'));
    await pulled('forgotten');
    gc.want(pull('forgotten'));
    state.now = 10_000;
    expect(await collect(gc)).to.equal(0);
    gc.created(pull('ahead'));
    expect(await collect(gc)).to.equal(1);
    expect(removed, 'its container is gone too: it may go').to.deep.equal(['ahead id-ahead']);
    state.now = 10_000 + 3_600_000;
    expect(await collect(gc)).to.equal(1);
    expect(removed, 'a workload deleted while it waited').to.deep.equal(['ahead id-ahead', 'forgotten id-forgotten']);
  });

  // rx~image-gc~1
  it('an image the engine refuses to remove stays recorded and is tried again; one it no longer has is forgotten', async () => {
    const refuse: Record<string, string> = { used: 'image is in use by a container', gone: 'image not known' };
    const { gc, record, removed, state, pulled } = fake(refuse);
    for (const image of ['used', 'gone']) await pulled(image);
    state.now = 2000;
    expect(await collect(gc)).to.equal(0);
    expect(removed).to.deep.equal([]);
    expect(record.of('fake').map((r) => r.image)).to.deep.equal(['used']);
    // Its container went: the next collection tries again, and it goes.
    delete refuse.used;
    expect(await collect(gc)).to.equal(1);
    expect(removed).to.deep.equal(['used id-used']);
  });
});
