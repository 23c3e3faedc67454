// What a short call of the process driver is (lib/drivers/processes.ts), and how it ends: shared by its two ways of
// making one, the launcher shell and a spawn with pipes.

/** A program and its arguments. */
export interface Command {
  readonly binary: string;
  readonly args: readonly string[];
}

/** A short call. */
export interface Launch extends Command {
  /** Given on its stdin; otherwise stdin is /dev/null. */
  readonly input?: string;
  /** Bytes of stdout kept at most; more ends the call as `too-much` (unless `cut`). */
  readonly maxStdout: number;
  /** Bytes of stderr kept (the rest is not read). */
  readonly maxStderr: number;
}

/** How a call ended: its exit status and the start of what it wrote. */
export type Ending =
  | { readonly kind: 'exited'; readonly code: number; readonly stdout: Buffer; readonly stderr: Buffer }
  /** It wrote more on stdout than the caller keeps. */
  | { readonly kind: 'too-much'; readonly code: number }
  /** It could not be started at all; `missing` when there is no such command (not on the PATH, no file at its path). */
  | { readonly kind: 'not-run'; readonly message: string; readonly missing?: boolean }
  /** It ran and exited with `code`, but what it wrote could not be kept whole (a full disk). */
  | { readonly kind: 'output-lost'; readonly code: number; readonly message: string };

/** Signals a call while it runs; `pid()` is its pid while it runs and the pid is known. */
export type Kill = ((signal?: NodeJS.Signals) => void) & { readonly pid: () => number | undefined };
