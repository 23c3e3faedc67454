import { expect } from 'chai';
import type { Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';

export const testScheduler = () =>
  new TestScheduler((actual, expected) => {
    expect(actual).to.deep.equal(expected);
  });

/** Subscribes and records every value with the virtual time it arrived at. */
export function record<T>(source$: Observable<T>, scheduler: TestScheduler): { values: Array<[number, T]>; done: () => boolean } {
  const values: Array<[number, T]> = [];
  let completed = false;
  source$.subscribe({ next: (v) => values.push([scheduler.now(), v]), complete: () => (completed = true) });
  return { values, done: () => completed };
}
