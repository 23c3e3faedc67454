import { type MonoTypeOperatorFunction, identity, tap } from 'rxjs';
import type { Logger } from '../lib/logger.js';

/**
 * Tracing points: `trace(stage)` logs what passes a stage of a pipeline; `trace.note(stage, text)` says a
 * step in words. `enabled(stage)` tells whether the stage is traced at all (what to say need not be built).
 */
export type Trace = (<T>(stage: string) => MonoTypeOperatorFunction<T>) & {
  readonly note: (stage: string, text: string) => void;
  readonly enabled: (stage: string) => boolean;
};

export const noTrace: Trace = Object.assign(<T>() => identity as MonoTypeOperatorFunction<T>, { note: () => undefined, enabled: () => false });

const MAX_TRACE_TEXT = 400;

function describe(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? value : (JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > MAX_TRACE_TEXT ? `${text.slice(0, MAX_TRACE_TEXT)}…` : text;
}

/** The stages `--debug=<stages>` names: a stage is traced when it or a stage it belongs to (`workload` for `workload.loop`) is named, or `all`. */
export const stageFilter =
  (stages: readonly string[]) =>
  (stage: string): boolean =>
    stages.some((s) => s === 'all' || s === stage || stage.startsWith(`${s}.`));

/** `--debug`: logs what passes a stage, and its subscribe, error, complete and unsubscribe; only the stages `enabled` lets through. */
export function tracer(log: Logger, enabled: (stage: string) => boolean = () => true): Trace {
  const trace = <T>(stage: string): MonoTypeOperatorFunction<T> =>
    enabled(stage)
      ? tap<T>({
          subscribe: () => log.debug(`[${stage}] subscribed`),
          next: (value) => log.debug(`[${stage}] ${describe(value)}`),
          error: (err: unknown) => log.debug(`[${stage}] error: ${String(err)}`),
          complete: () => log.debug(`[${stage}] complete`),
          unsubscribe: () => log.debug(`[${stage}] unsubscribed`),
        })
      : identity;
  return Object.assign(trace, { note: (stage: string, text: string) => enabled(stage) && log.debug(`[${stage}] ${describe(text)}`), enabled });
}
