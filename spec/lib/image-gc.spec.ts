// The image collector's rules (lib/runtimes/base/image-gc.ts) on a fake engine and a clock of the spec's own.
import { expect } from 'chai';
import { lastValueFrom, of, throwError } from 'rxjs';
import { ImageCollector, type ImageEngine, ImageRecord } from '../../lib/runtimes/base/image-gc.js';
import type { ImagePull } from '../../lib/runtimes/base/images.js';

const pull = (image: string): ImagePull => ({ policy: 'missing', image, storage: [], args: [], present: [] });

function fake(refuse: Readonly<Record<string, string>> = {}) {
  const removed: string[] = [];
  const state = { now: 0, inUse: new Set<string>() };
  const engine: ImageEngine = {
    name: 'fake',
    imagesInUse: () => of(state.inUse),
    remove: (_storage, image) => {
      if (refuse[image]) return throwError(() => new Error(refuse[image]));
      removed.push(image);
      return of('');
    },
    storeFolder: () => throwError(() => new Error('no store')),
  };
  const record = new ImageRecord(undefined, 'fake');
  const gc = new ImageCollector(engine, record, { high: 85, low: 80, minAgeMs: 1000 }, {}, () => state.now);
  return { gc, record, removed, state };
}

describe('the image collector (lib/runtimes/base/image-gc.ts)', () => {
  // rx~image-gc~1
  it('removes the images it recorded once no container uses them and they are older than min_age, oldest first', async () => {
    const { gc, removed, state } = fake();
    gc.pulled(pull('a'));
    state.now = 10;
    gc.pulled(pull('b'));
    state.now = 20;
    gc.pulled(pull('c'));
    state.inUse = new Set(['b']);
    state.now = 500;
    expect(await lastValueFrom(gc.collect()), 'none old enough').to.equal(0);
    state.now = 1015;
    expect(await lastValueFrom(gc.collect())).to.equal(1);
    expect(removed).to.deep.equal(['a']);
    state.now = 5000;
    expect(await lastValueFrom(gc.collect())).to.equal(1);
    expect(removed, 'b is in use').to.deep.equal(['a', 'c']);
  });

  // rx~image-gc~1
  it('keeps an image a waiting workload wants until its create is done, or for an hour at most', async () => {
    const { gc, removed, state } = fake();
    gc.pulled(pull('ahead'));
    gc.want(pull('ahead'));
    gc.pulled(pull('forgotten'));
    gc.want(pull('forgotten'));
    state.now = 10_000;
    expect(await lastValueFrom(gc.collect())).to.equal(0);
    gc.created(pull('ahead'));
    expect(await lastValueFrom(gc.collect())).to.equal(1);
    expect(removed, 'its container is gone too: it may go').to.deep.equal(['ahead']);
    state.now = 10_000 + 3_600_000;
    expect(await lastValueFrom(gc.collect())).to.equal(1);
    expect(removed, 'a workload deleted while it waited').to.deep.equal(['ahead', 'forgotten']);
  });

  // rx~image-gc~1
  it('an image the engine refuses to remove stays recorded and is tried again; one it no longer has is forgotten', async () => {
    const { gc, record, removed, state } = fake({ used: 'image is in use by a container', gone: 'image not known' });
    for (const image of ['used', 'gone']) gc.pulled(pull(image));
    state.now = 2000;
    expect(await lastValueFrom(gc.collect())).to.equal(0);
    expect(removed).to.deep.equal([]);
    expect(record.of('fake').map((r) => r.image)).to.deep.equal(['used']);
  });
});
