import { type MonoTypeOperatorFunction, Observable } from 'rxjs';

/**
 * Delivers values in order, one at a time: a value that arrives while the previous one is still being
 * delivered (re-entrantly, from downstream) waits until that delivery is complete. Like
 * `observeOn(queueScheduler)`, without a scheduled subscription per value (which costs O(pending) each).
 */
export function trampoline<T>(): MonoTypeOperatorFunction<T> {
  return (source) =>
    new Observable<T>((subscriber) => {
      const queue: T[] = [];
      let draining = false;
      return source.subscribe({
        next: (value) => {
          queue.push(value);
          if (draining) return;
          draining = true;
          try {
            for (let i = 0; i < queue.length; i++) subscriber.next(queue[i]);
          } finally {
            queue.length = 0;
            draining = false;
          }
        },
        error: (err: unknown) => subscriber.error(err),
        complete: () => subscriber.complete(),
      });
    });
}
