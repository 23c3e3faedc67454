import { type MonoTypeOperatorFunction, identity, tap } from 'rxjs';
import type { Logger } from '../lib/logger.js';

/** Places a named tracing point on a stage of a pipeline. */
export type Trace = <T>(stage: string) => MonoTypeOperatorFunction<T>;

export const noTrace: Trace = () => identity;

const MAX_TRACE_TEXT = 400;

function describe(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > MAX_TRACE_TEXT ? `${text.slice(0, MAX_TRACE_TEXT)}…` : text;
}

/** `--debug`: logs what passes a stage, and its subscribe, error, complete and unsubscribe. */
export function tracer(log: Logger): Trace {
  return <T>(stage: string) =>
    tap<T>({
      subscribe: () => log.debug(`[${stage}] subscribed`),
      next: (value) => log.debug(`[${stage}] ${describe(value)}`),
      error: (err: unknown) => log.debug(`[${stage}] error: ${String(err)}`),
      complete: () => log.debug(`[${stage}] complete`),
      unsubscribe: () => log.debug(`[${stage}] unsubscribed`),
    });
}
