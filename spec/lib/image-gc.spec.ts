// The image collector's rules (lib/runtimes/containers/image-gc.ts) on a fake engine and a clock of the spec's own.
import { expect } from 'chai';
import { Subject, Subscription, VirtualAction, VirtualTimeScheduler, lastValueFrom, mergeMap, of, throwError, timer } from 'rxjs';
import { ImageCollector, type ImageEngine, type ImageNames } from '../../lib/runtimes/containers/image-gc.js';
import { ImageRecord } from '../../lib/runtimes/containers/image-record.js';
import type { ImagePull } from '../../lib/runtimes/containers/images.js';

const pull = (image: string): ImagePull => ({ policy: 'missing', image, storage: [], args: [], present: [] });

/** An engine whose images are `state.images` (reference → the image it names) and whose removals go by id. */
function fake(refuse: Readonly<Record<string, string>> = {}, scheduler = new VirtualTimeScheduler(VirtualAction, 10_000), held = new Subscription()) {
  const removed: string[] = [];
  /** `pulls`: how many pulls of an image the engine's log has (the agent's own among them); `names`: what tag and untag did. */
  const state = { now: 0, inUse: new Set<string>(), images: new Map<string, ImageNames>(), pulls: new Map<string, number>(), names: [] as string[] };
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
    pullsSince: (_storage, image) => of(state.pulls.get(image) ?? 1),
    tag: (_storage, image, name) => {
      const names = state.images.get(image);
      if (names) state.images.set(image, { ...names, names: [...names.names, name] });
      state.names.push(`tag ${image} ${name}`);
      return of('');
    },
    untag: (_storage, name) => {
      for (const [image, names] of state.images) state.images.set(image, { ...names, names: names.names.filter((n) => n !== name) });
      state.names.push(`untag ${name}`);
      return of('');
    },
  };
  const record = new ImageRecord(undefined, 'fake');
  const gc = new ImageCollector(engine, record, { high: 85, low: 80, minAgeMs: 1000 }, {}, scheduler, held);
  /** The agent pulled `image` (its pull printed `printed`, the id unless given): it names the image `id` alone. */
  const pulled = (image: string, id = `id-${image}`, printed = id) => {
    state.images.set(image, { id, names: [image] });
    return lastValueFrom(gc.pulled(pull(image), { since: state.now, printed }), { defaultValue: undefined });
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
    await lastValueFrom(gc.pulled(pull('vanished'), { since: 0 }), { defaultValue: undefined });
    expect(record.of('fake')).to.deep.equal([]);
  });

  // rx~image-gc~1
  it('records a pulled image though the work that pulled it let go while the engine was asked: the image is not left nobody’s', () => {
    const { gc, engine, record } = fake();
    // The engine answers once the work has let go.
    const answer = new Subject<ImageNames | undefined>();
    engine.describe = () => answer;
    const asked = gc.pulled(pull('app:2'), { since: 0 }).subscribe();
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

  // rx~image-gc~1
  it("records an image only as the agent's own pull told it: not when its reference names another image than the pull printed, nor when another pull of it was logged since the agent found it missing", async () => {
    const { record, state, pulled } = fake();
    await pulled('raced', 'a'.repeat(64), 'b'.repeat(64));
    // A user pulled the same image at the same moment: the engine logged two pulls of it.
    state.pulls.set('shared', 2);
    await pulled('shared');
    await pulled('alone');
    expect(record.of('fake').map((r) => r.image)).to.deep.equal(['alone']);
  });

  // rx~image-gc~1
  it("holds an image a workload waits for that the agent did not pull, until its create; another agent's collector keeps an image so held and removes it once the hold is let go", async () => {
    const a = fake();
    await a.pulled('shared:1');
    // Agent B's workload waits for the image agent A pulled: B gives it a hold name of its own.
    const b = fake();
    b.state.images = a.state.images;
    await lastValueFrom(b.gc.hold(pull('shared:1')), { defaultValue: undefined });
    await lastValueFrom(b.gc.hold(pull('shared:1')), { defaultValue: undefined });
    expect(b.state.names, 'one hold name, given once').to.have.length(1);
    expect(b.state.names[0]).to.match(/^tag shared:1 localhost\/ankaios-hold:agent-[0-9a-f]{8}$/);
    a.state.now = 5000;
    expect(await collect(a.gc), 'held by B').to.equal(0);
    expect(
      a.record.of('fake').map((r) => r.image),
      'still A’s: tried again later',
    ).to.deep.equal(['shared:1']);
    b.gc.created(pull('shared:1'));
    expect(b.state.names.at(-1)).to.equal(b.state.names[0].replace(/^tag shared:1 /, 'untag '));
    expect(await collect(a.gc)).to.equal(1);
    expect(a.removed).to.deep.equal(['shared:1 id-shared:1']);
  });

  // rx~image-gc~1
  it('gives an image its hold name once when the workloads that wait for it ask at once, and each of them hears when it is given', () => {
    const scheduler = new VirtualTimeScheduler(VirtualAction, 10_000);
    const b = fake({}, scheduler);
    b.state.images.set('shared:1', { id: 'id-shared', names: ['shared:1'] });
    const tag = b.engine.tag;
    // The engine takes a while to give the name: the second workload asks meanwhile.
    (b.engine as { tag: ImageEngine['tag'] }).tag = (...args) => timer(100, scheduler).pipe(mergeMap(() => tag(...args)));
    const given: string[] = [];
    for (const workload of ['first', 'second']) b.gc.hold(pull('shared:1')).subscribe({ complete: () => given.push(workload) });
    scheduler.flush();
    expect(b.state.names, 'one tag').to.have.length(1);
    expect(given).to.deep.equal(['first', 'second']);
  });

  // rx~image-gc~1
  it('holds none of its own pulls, and lets go of a hold after an hour when the workload never came to its create', async () => {
    const scheduler = new VirtualTimeScheduler(VirtualAction, 2 * 3_600_000);
    const { gc, state, pulled } = fake({}, scheduler);
    await pulled('mine:1', 'c'.repeat(64));
    await lastValueFrom(gc.hold(pull('mine:1')), { defaultValue: undefined });
    expect(state.names, 'the agent pulled it: its own collector keeps it while wanted').to.deep.equal([]);
    state.images.set('theirs:1', { id: 'id-theirs', names: ['theirs:1'] });
    await lastValueFrom(gc.hold(pull('theirs:1')), { defaultValue: undefined });
    expect(state.names).to.have.length(1);
    scheduler.now = () => (state.now = scheduler.frame);
    scheduler.flush();
    expect(state.names, 'let go after an hour').to.have.length(2);
    expect(state.images.get('theirs:1')?.names).to.deep.equal(['theirs:1']);
  });
});
