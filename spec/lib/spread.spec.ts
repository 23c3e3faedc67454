import { expect } from 'chai';
import { Subject, mergeMap, take } from 'rxjs';
import { spread } from '../../lib/spread.js';
import { testScheduler as scheduler } from '../helpers/virtual-time.js';

describe('spread (mergeMap of an array, without a subscription per value)', () => {
  it('emits what the project returns for each value, at once and in order, and completes with its source', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const source = cold('a-b-c---|', { a: 1, b: 0, c: 2 });
      expectObservable(source.pipe(spread((n: number) => Array.from({ length: n }, (_, i) => `${n}.${i}`)))).toBe('a---(bc)|', {
        a: '1.0',
        b: '2.0',
        c: '2.1',
      });
    });
  });

  it("errors when the project throws, as mergeMap does, and passes on its source's error", () => {
    scheduler().run(({ cold, expectObservable }) => {
      const boom = (n: number) => {
        if (n === 2) throw new Error('boom');
        return [n];
      };
      expectObservable(cold('a-b-c|', { a: 1, b: 2, c: 3 }).pipe(spread(boom))).toBe('a-#', { a: 1 }, new Error('boom'));
      expectObservable(cold('a---#', { a: 1 }).pipe(spread((n: number) => [n, n]))).toBe('(aa)#', { a: 1 });
    });
  });

  it('gives what mergeMap gives when values come while others are being delivered, and stops once unsubscribed', () => {
    const run = (operator: typeof spread) => {
      const input = new Subject<number>();
      const seen: number[] = [];
      input.pipe(operator((n: number) => [n, n * 10])).subscribe((n) => {
        seen.push(n);
        if (n === 1) input.next(2);
      });
      input.next(1);
      return seen;
    };
    expect(run(spread)).to.deep.equal(run((project) => mergeMap(project)));
    const seen: number[] = [];
    const input = new Subject<number>();
    input
      .pipe(
        spread((n: number) => [n, n + 1, n + 2]),
        take(2),
      )
      .subscribe((n) => seen.push(n));
    input.next(5);
    expect(seen).to.deep.equal([5, 6]);
  });
});
