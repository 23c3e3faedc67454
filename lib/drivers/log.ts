import winston from 'winston';
import { type Logger, logLine } from '../logger.js';

/** Human-readable lines on stderr: `2026-11-22T07:30:00.000Z warn  No connection …`. */
export function createLogger(debug: boolean): Logger {
  return winston.createLogger({
    level: debug ? 'debug' : 'info',
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format.printf(({ timestamp, level, message }) => logLine(String(timestamp), level, String(message))),
    ),
    transports: [new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] })],
  });
}
