// The agent's own log: one line per call on stderr, in the format the start's lines have (lib/logger.ts).
import { expect } from 'chai';
import { createLogger } from '../../lib/drivers/log.js';

const written = (debug: boolean, say: (log: ReturnType<typeof createLogger>) => void): string[] => {
  const lines: string[] = [];
  say(createLogger(debug, (line) => lines.push(line)));
  return lines;
};

describe('the log', () => {
  it('writes each message as one whole line: its time, its level padded to five, then the message', () => {
    const before = Date.now();
    const lines = written(false, (log) => {
      log.error('a');
      log.warn('b c');
      log.info('d');
    });
    expect(lines.map((l) => l.slice(24))).to.deep.equal([' error a\n', ' warn  b c\n', ' info  d\n']);
    for (const line of lines) {
      const at = Date.parse(line.slice(0, 24));
      expect(line.slice(0, 24)).to.equal(new Date(at).toISOString());
      expect(at).to.be.within(before, Date.now());
    }
  });

  it('writes debug lines under --debug only, and builds none when it is off', () => {
    expect(written(true, (log) => log.debug('seen')))
      .to.have.length(1)
      .and.to.satisfy((l: string[]) => l[0].endsWith(' debug seen\n'));
    let built = 0;
    const message = { toString: () => String(++built) } as unknown as string;
    expect(written(false, (log) => log.debug(message))).to.deep.equal([]);
    expect(built).to.equal(0);
  });
});
