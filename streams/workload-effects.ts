// What each effect and follow of a workload's control loop does on its runtime and host, as outcomes for the
// loop's step (lib/workload-loop.ts decides, streams/control-workload.ts schedules, this runs). The effects name
// their runtime by the spec's runtime name; the step has found it among `runtimes` before asking (all but a
// removal by name, of a workload whose runtime the agent may not have).
import { EMPTY, type Observable, type SchedulerLike, catchError, concat, defaultIfEmpty, defer, endWith, ignoreElements, map, mergeMap, of, timer } from 'rxjs';
import { ConfigurationError, type CreateOptions, type RuntimeConnector } from '../lib/runtime-connector.js';
import type { WorkloadSpec } from '../lib/workload.js';
import type { Effect, Follow, LoopInput } from '../lib/workload-loop.js';

export interface EffectDeps {
  readonly runtimes: ReadonlyMap<string, RuntimeConnector>;
  /** The run's clock and timers (the waits of retries, back-offs and finds). */
  readonly scheduler: SchedulerLike;
  /** Prepares the host side of a workload (Control Interface, files) before it is created. */
  readonly prepare: (spec: WorkloadSpec) => Observable<CreateOptions>;
  /** Undoes `prepare` once the workload is gone. */
  readonly release: (spec: WorkloadSpec) => Observable<never>;
  /** Removes what a create that failed must not leave behind (the workload's files). */
  readonly discard?: (spec: WorkloadSpec) => Observable<never>;
}

export type Work = Exclude<Effect, { kind: 'warn' }>;

const causeOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** What an action that emits nothing came to: `undefined` when it completed, else why it failed. */
const failureOf = (action$: Observable<unknown>): Observable<string | undefined> =>
  action$.pipe(
    ignoreElements(),
    endWith(undefined),
    catchError((err: unknown) => of(causeOf(err))),
  );

/** The work of a busy state: one outcome. */
export function worked(effect: Work, deps: EffectDeps): Observable<LoopInput> {
  // The step found it among the runtimes before asking (all but a removal by name: see there).
  const runtime = deps.runtimes.get(effect.kind === 'removeExisting' ? effect.existing.runtime : effect.spec.runtime)!;
  switch (effect.kind) {
    case 'removeByName': {
      // A workload of a runtime the agent does not have was never created: only its host side goes.
      const byName$ =
        deps.runtimes
          .get(effect.spec.runtime)
          ?.deleteByName?.(effect.spec.instanceName)
          .pipe(catchError(() => EMPTY)) ?? EMPTY;
      return failureOf(concat(byName$, deps.release(effect.spec))).pipe(map((failure): LoopInput => ({ kind: 'removed', failure })));
    }
    case 'create': {
      const { spec } = effect;
      // Whatever failed, the workload's files go before the failure is told.
      const discarded$ = defer(() => deps.discard?.(spec) ?? EMPTY).pipe(catchError(() => EMPTY));
      return deps.prepare(spec).pipe(
        mergeMap((options) => runtime.createWorkload(spec, options)),
        map((id): LoopInput => ({ kind: 'created', id })),
        defaultIfEmpty<LoopInput, LoopInput>({ kind: 'createFailed', cause: 'The runtime gave no id for it.', refused: false }),
        catchError((err: unknown) =>
          concat(discarded$, of<LoopInput>({ kind: 'createFailed', cause: causeOf(err), refused: err instanceof ConfigurationError })),
        ),
      );
    }
    case 'startAgain':
      return concat(effect.prepare ? deps.prepare(effect.spec) : EMPTY, runtime.startAgain!(effect.id, effect.spec)).pipe(
        ignoreElements(),
        endWith<LoopInput>({ kind: 'startedAgain' }),
        catchError(() => of<LoopInput>({ kind: 'startAgainFailed' })),
      );
    case 'remove':
      return failureOf(concat(runtime.deleteWorkload(effect.id), deps.release(effect.spec))).pipe(map((failure): LoopInput => ({ kind: 'removed', failure })));
    case 'removeExisting':
      return failureOf(runtime.deleteWorkload(effect.existing.id)).pipe(map((failure): LoopInput => ({ kind: 'existingRemoved', failure })));
    case 'stop':
      return (runtime.stop?.(effect.id) ?? EMPTY).pipe(
        ignoreElements(),
        catchError(() => EMPTY),
        endWith<LoopInput>({ kind: 'stoppedUnhealthy', state: effect.state }),
      );
    case 'find':
      return deps.prepare(effect.spec).pipe(
        mergeMap(() => runtime.getWorkloadId(effect.spec.instanceName)),
        defaultIfEmpty(undefined),
        map((id): LoopInput => ({ kind: 'found', id })),
        catchError((err: unknown) => of<LoopInput>({ kind: 'found', failure: causeOf(err) })),
      );
  }
}

/** What a settled state follows: outcomes until the next command or another state. */
export function followed(f: Follow, deps: EffectDeps): Observable<LoopInput> {
  switch (f.kind) {
    case 'watch': {
      const { id, spec } = f.running;
      return deps.runtimes
        .get(spec.runtime)!
        .checkState(id, spec)
        .pipe(
          map((state): LoopInput => ({ kind: 'seen', state })),
          catchError(() => of<LoopInput>({ kind: 'watchFailed' })),
        );
    }
    case 'wait':
      return timer(f.ms, deps.scheduler).pipe(map((): LoopInput => ({ kind: 'waited' })));
    case 'pull':
      return (deps.runtimes.get(f.spec.runtime)?.fetchImages?.(f.spec, f.images) ?? EMPTY).pipe(
        map((note): LoopInput => ({ kind: 'pullNote', note })),
        endWith<LoopInput>({ kind: 'pulled' }),
        catchError((err: unknown) => of<LoopInput>({ kind: 'pullFailed', cause: causeOf(err) })),
      );
  }
}
