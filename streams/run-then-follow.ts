// The control loop's rhythm as an operator: work that must not be cut short, then watching that must
// stop the moment there is new work.
import { BehaviorSubject, type Observable, type OperatorFunction, concat, concatMap, defer, filter, takeUntil, tap } from 'rxjs';

/**
 * Runs `run(item)` for each item, one after another and each to its end; after the last one, `follow()`
 * until the next item arrives (an item that comes while a run is under way waits for it, and no
 * follow starts in between).
 */
export function runThenFollow<T, R>(run: (item: T) => Observable<R>, follow: () => Observable<R>): OperatorFunction<T, R> {
  return (items$) =>
    defer(() => {
      const arrived$ = new BehaviorSubject(0);
      return items$.pipe(
        tap(() => arrived$.next(arrived$.value + 1)),
        concatMap((item, index) => {
          const next$ = arrived$.pipe(filter((count) => count > index + 1));
          return concat(run(item), defer(follow).pipe(takeUntil(next$)));
        }),
      );
    });
}
