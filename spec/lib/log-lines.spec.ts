import { expect } from 'chai';
import { CAMPAIGN_CLOSED, LogLines } from '../../lib/log-lines.js';

const bytes = (text: string) => Buffer.from(text);

describe('log output as lines', () => {
  it('joins a line written in pieces and splits chunks holding several lines', () => {
    const lines = new LogLines(100);
    expect(lines.push(bytes('one\ntw'))).to.deep.equal(['one']);
    expect(lines.push(bytes('o\nthree\n\nfo'))).to.deep.equal(['two', 'three', '']);
    expect(lines.end()).to.deep.equal(['fo']);
  });

  it('decodes a character split between chunks whole', () => {
    const lines = new LogLines(100);
    const euro = bytes('€\n');
    expect(lines.push(euro.subarray(0, 1))).to.deep.equal([]);
    expect(lines.push(euro.subarray(1))).to.deep.equal(['€']);
  });

  it('keeps only the first bytes of a long line and takes the next line whole', () => {
    const lines = new LogLines(4);
    expect(lines.push(bytes('abcdefgh'))).to.deep.equal([]);
    expect(lines.push(bytes('ijk\nxy\n'))).to.deep.equal(['abcd', 'xy']);
  });

  // swdd~agent-checks-size-of-logs~1
  it('closes on a line longer than the limit: the line is dropped for the closing entry and nothing after it is taken', () => {
    const lines = new LogLines(4, 10);
    expect(lines.push(bytes('ok\n0123456789'))).to.deep.equal(['ok']);
    expect(lines.closed).to.equal(false);
    expect(lines.push(bytes('X\nafter\n'))).to.deep.equal([CAMPAIGN_CLOSED]);
    expect(lines.closed).to.equal(true);
    expect(lines.push(bytes('more\n'))).to.deep.equal([]);
    expect(lines.end()).to.deep.equal([]);
  });

  it('takes a line of exactly the limit', () => {
    const lines = new LogLines(4, 10);
    expect(lines.push(bytes('0123456789\n'))).to.deep.equal(['0123']);
    expect(lines.closed).to.equal(false);
  });
});
