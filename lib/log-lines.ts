// A program's output as lines, in bounded memory: a line longer than what is kept of it is counted, not
// held, and one too long to be a log line ends the output's collection.

/** What a log response (2 MiB at most) carries of one line, with room for its envelope: a longer line is cut there. */
export const MAX_LINE_BYTES = 2 * 1024 * 1024 - 64 * 1024;

/** swdd~agent-checks-size-of-logs~1: a single line longer than this closes the log campaign of its output. */
export const LOG_CAMPAIGN_LIMIT_BYTES = 50 * 1024 * 1024;
/** The entry that takes the place of such a line (the released agent's words). */
export const CAMPAIGN_CLOSED = 'The previous log message exceeded the maximum 50 MB size. Closing the log campaign.';

const LINE_FEED = 0x0a;

/**
 * Splits a byte stream into lines (UTF-8, undecodable bytes replaced), keeping at most `keepBytes` of
 * each (what a log response could carry: the rest is cut there anyway). A line that passes
 * `limitBytes` before it ends is dropped for CAMPAIGN_CLOSED, and nothing after it is taken.
 */
export class LogLines {
  private parts: Buffer[] = [];
  private keptBytes = 0;
  private lineBytes = 0;
  private closedFlag = false;

  constructor(
    private readonly keepBytes: number,
    private readonly limitBytes = LOG_CAMPAIGN_LIMIT_BYTES,
  ) {}

  /** True once a line was too long: the output should not be read any further. */
  get closed(): boolean {
    return this.closedFlag;
  }

  /** The lines a chunk of output completes. */
  push(chunk: Buffer): string[] {
    if (this.closedFlag) return [];
    const lines: string[] = [];
    let start = 0;
    for (let end = chunk.indexOf(LINE_FEED); end >= 0; end = chunk.indexOf(LINE_FEED, start)) {
      if (this.lineBytes === 0 && end - start <= this.keepBytes) {
        // The common case, a whole line in one chunk: decoded where it is.
        lines.push(chunk.toString('utf8', start, end));
      } else {
        this.keep(chunk.subarray(start, end));
        if (this.closedFlag) return [...lines, CAMPAIGN_CLOSED];
        lines.push(this.take());
      }
      start = end + 1;
    }
    this.keep(chunk.subarray(start));
    return this.closedFlag ? [...lines, CAMPAIGN_CLOSED] : lines;
  }

  /** The last line, if the output ended without a line feed. */
  end(): string[] {
    return this.lineBytes > 0 && !this.closedFlag ? [this.take()] : [];
  }

  private keep(bytes: Buffer): void {
    this.lineBytes += bytes.length;
    if (this.lineBytes > this.limitBytes) {
      this.closedFlag = true;
      this.parts = [];
      return;
    }
    const kept = bytes.subarray(0, Math.max(0, this.keepBytes - this.keptBytes));
    if (kept.length === 0) return;
    // A copy: a view would hold the whole chunk it came from.
    this.parts.push(Buffer.from(kept));
    this.keptBytes += kept.length;
  }

  private take(): string {
    const line = Buffer.concat(this.parts).toString('utf8');
    this.parts = [];
    this.keptBytes = 0;
    this.lineBytes = 0;
    return line;
  }
}
