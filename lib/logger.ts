/** What the agent's code needs of a logger (winston's loggers fit). */
export interface Logger {
  error(message: string): void;
  warn(message: string): void;
  info(message: string): void;
  debug(message: string): void;
}

export const silentLogger: Logger = { error() {}, warn() {}, info() {}, debug() {} };
