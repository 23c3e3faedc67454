import { expect } from 'chai';
import { Subject } from 'rxjs';
import { trampoline } from '../../streams/trampoline.js';

describe('trampoline', () => {
  it('finishes delivering a value before delivering the values it caused', () => {
    const input = new Subject<number>();
    const seen: string[] = [];
    input.pipe(trampoline()).subscribe((n) => {
      seen.push(`start ${n}`);
      if (n < 3) input.next(n + 1);
      seen.push(`end ${n}`);
    });
    input.next(1);
    input.next(10);
    expect(seen).to.deep.equal(['start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3', 'start 10', 'end 10']);
  });
});
