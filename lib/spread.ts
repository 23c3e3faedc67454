// An operator for the hot paths. rxjs's mergeMap makes an observable and a subscription for each value, even
// for a project that returns an array: several µs a value while the code is cold, which is most of the time for
// a path that runs a few times a create. This one emits what the project returns at once.
import { Observable, type OperatorFunction } from 'rxjs';

/**
 * Each value `project` returns for a value, at once and in order: what mergeMap gives for a project that returns
 * an array, without an inner subscription per value. A project that throws errors the stream.
 */
export function spread<T, R>(project: (value: T) => Iterable<R>): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) =>
      source.subscribe({
        next: (value) => {
          let results: Iterable<R>;
          try {
            results = project(value);
          } catch (err) {
            subscriber.error(err);
            return;
          }
          for (const result of results) {
            if (subscriber.closed) return;
            subscriber.next(result);
          }
        },
        error: (err: unknown) => subscriber.error(err),
        complete: () => subscriber.complete(),
      }),
    );
}
