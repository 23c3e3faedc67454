/** What the agent's code needs of a logger (lib/drivers/log.ts writes its lines on stderr). */
export interface Logger {
  error(message: string): void;
  warn(message: string): void;
  info(message: string): void;
  debug(message: string): void;
}

export const silentLogger: Logger = { error() {}, warn() {}, info() {}, debug() {} };

/** A log line as the agent writes it on stderr: `2026-11-22T07:30:00.000Z warn  No connection …`. */
export const logLine = (timestamp: string, level: string, message: string): string => `${timestamp} ${level.padEnd(5)} ${message}`;
