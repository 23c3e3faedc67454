import { expect } from 'chai';
import { LayeredMap } from '../../lib/layered-map.js';

describe('LayeredMap (the container view’s maps)', () => {
  // swdd~podmancli-uses-container-state-cache~1: the cache's picture, changed event by event
  it('reads as the map it changed, entry for entry, and leaves every earlier map as it was', () => {
    const base = new Map(Array.from({ length: 100 }, (_, i) => [`k${i}`, i] as [string, number | undefined]));
    const truth = new Map(base);
    const maps: Array<[LayeredMap<number | undefined>, Map<string, number | undefined>]> = [];
    let map = LayeredMap.of(base);
    // Enough changes to flatten more than once: sets of new and known keys, removals, a value that is undefined.
    for (let i = 0; i < 200; i++) {
      const key = `k${(i * 7) % 130}`;
      if (i % 5 === 0) {
        map = map.without(key);
        truth.delete(key);
      } else {
        const value = i % 11 === 0 ? undefined : i;
        map = map.with(key, value);
        truth.set(key, value);
      }
      maps.push([map, new Map(truth)]);
    }
    for (const [layered, expected] of maps) {
      expect(layered.size).to.equal(expected.size);
      expect(new Map(layered)).to.deep.equal(expected);
      for (const key of ['k0', 'k3', 'k99', 'k120', 'k200']) {
        expect(layered.has(key), key).to.equal(expected.has(key));
        expect(layered.get(key), key).to.equal(expected.get(key));
      }
    }
    expect(new Map(LayeredMap.of(base))).to.deep.equal(new Map(Array.from({ length: 100 }, (_, i) => [`k${i}`, i])));
  });

  it('removing a key it does not hold gives the same map', () => {
    const map = LayeredMap.of(new Map([['a', 1]]));
    expect(map.without('b')).to.equal(map);
  });
});
