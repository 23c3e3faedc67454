// An immutable map that changes by layers: what changed since its base is kept apart, so that a change copies
// the changes, not the whole map. The container view's maps (lib/container-view.ts) change a key or two at each
// event and hold an entry for each of the node's containers: copied whole, a burst of N creates cost N².

/** What a key removed since the base reads as among the changes. */
const GONE: unique symbol = Symbol('gone');

/** How many changes a map keeps apart before it is flattened into a new base (one copy every so many changes). */
const MAX_CHANGES = 32;

export class LayeredMap<V> implements ReadonlyMap<string, V> {
  private constructor(
    private readonly base: ReadonlyMap<string, V>,
    private readonly changes: ReadonlyMap<string, V | typeof GONE>,
    readonly size: number,
  ) {}

  /** `map` as the base of a layered one (itself when it is one). */
  static of<V>(map: ReadonlyMap<string, V>): LayeredMap<V> {
    return map instanceof LayeredMap ? (map as LayeredMap<V>) : new LayeredMap(map, new Map(), map.size);
  }

  get(key: string): V | undefined {
    const changed = this.changes.get(key);
    if (changed === GONE) return undefined;
    return changed !== undefined || this.changes.has(key) ? (changed as V) : this.base.get(key);
  }

  has(key: string): boolean {
    return this.changes.has(key) ? this.changes.get(key) !== GONE : this.base.has(key);
  }

  /** A map with `key` set to `value`; this one as it was. */
  with(key: string, value: V): LayeredMap<V> {
    return this.changed(key, value, this.has(key) ? this.size : this.size + 1);
  }

  /** A map without `key`; this one as it was. */
  without(key: string): LayeredMap<V> {
    return this.has(key) ? this.changed(key, GONE, this.size - 1) : this;
  }

  private changed(key: string, value: V | typeof GONE, size: number): LayeredMap<V> {
    const changes = new Map(this.changes).set(key, value);
    if (changes.size <= MAX_CHANGES) return new LayeredMap(this.base, changes, size);
    const flat = new Map<string, V>();
    for (const [k, v] of this.base) if (!changes.has(k)) flat.set(k, v);
    for (const [k, v] of changes) if (v !== GONE) flat.set(k, v);
    return new LayeredMap(flat, new Map(), size);
  }

  *entries(): MapIterator<[string, V]> {
    for (const entry of this.base) if (!this.changes.has(entry[0])) yield entry;
    for (const [k, v] of this.changes) if (v !== GONE) yield [k, v];
  }

  *keys(): MapIterator<string> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): MapIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.entries();
  }

  forEach(each: (value: V, key: string, map: ReadonlyMap<string, V>) => void): void {
    for (const [k, v] of this.entries()) each(v, k, this);
  }
}
