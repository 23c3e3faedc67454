import { type Logger, logLine } from '../logger.js';

/**
 * Human-readable lines on stderr: `2026-11-22T07:30:00.000Z warn  No connection …`, one write each. Debug lines
 * only under --debug: when off, a debug call formats nothing.
 */
export function createLogger(debug: boolean, write: (line: string) => unknown = (line) => process.stderr.write(line)): Logger {
  const at = (level: string) => (message: string) => void write(`${logLine(new Date().toISOString(), level, message)}\n`);
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: debug ? at('debug') : () => {} };
}
