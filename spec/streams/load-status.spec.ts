import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { expect } from 'chai';
import { parseMemFree, parseProcStat, sampleMachine } from '../../lib/drivers/machine.js';
import type { MachineSample } from '../../lib/ports.js';
import { cpuPercent, loadStatus } from '../../streams/load-status.js';
import { testScheduler } from '../helpers/virtual-time.js';

describe('AgentLoadStatus', () => {
  // swdd~agent-sends-node-resource-availability-to-server~1
  it('is sent right after the hello, then every 2 seconds while connected, with the CPU usage since the previous sample; each connection starts anew', () => {
    testScheduler().run(({ cold, expectObservable }) => {
      const samples: MachineSample[] = [
        { cpuBusy: 0, cpuTotal: 0, freeMemory: 100 },
        { cpuBusy: 50, cpuTotal: 200, freeMemory: 90 },
        { cpuBusy: 50, cpuTotal: 400, freeMemory: 80 },
        { cpuBusy: 150, cpuTotal: 500, freeMemory: 70 },
      ];
      let i = 0;
      const online$ = cold('10ms c 2499ms (oc) 2999ms o', { c: true, o: false });
      expectObservable(
        loadStatus(() => samples[Math.min(i++, samples.length - 1)], online$),
        '^ 8000ms !',
      ).toBe('10ms a 1999ms b 499ms c 1999ms d', {
        a: { cpuUsage: 25, freeMemory: 90 },
        b: { cpuUsage: 0, freeMemory: 80 },
        c: { cpuUsage: 100, freeMemory: 70 },
        d: { cpuUsage: 0, freeMemory: 70 },
      });
    });
  });

  // swdd~agent-provides-resource-metrics~1
  it('computes (new busy - old busy) / (new total - old total) * 100, within 0 to 100', () => {
    expect(cpuPercent({ cpuBusy: 10, cpuTotal: 100, freeMemory: 0 }, { cpuBusy: 60, cpuTotal: 200, freeMemory: 0 })).to.equal(50);
    expect(cpuPercent({ cpuBusy: 10, cpuTotal: 100, freeMemory: 0 }, { cpuBusy: 10, cpuTotal: 100, freeMemory: 0 })).to.equal(0);
    // Counters that went backwards (a reset) or a busy share past the total (samples taken apart) stay within bounds.
    expect(cpuPercent({ cpuBusy: 60, cpuTotal: 100, freeMemory: 0 }, { cpuBusy: 10, cpuTotal: 200, freeMemory: 0 })).to.equal(0);
    expect(cpuPercent({ cpuBusy: 10, cpuTotal: 100, freeMemory: 0 }, { cpuBusy: 300, cpuTotal: 200, freeMemory: 0 })).to.equal(100);
    expect(cpuPercent({ cpuBusy: 10, cpuTotal: 200, freeMemory: 0 }, { cpuBusy: 20, cpuTotal: 100, freeMemory: 0 })).to.equal(0);
  });

  it('reads /proc/stat and /proc/meminfo', () => {
    expect(parseProcStat('cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n')).to.deep.equal({ cpuBusy: 150, cpuTotal: 1000 });
    expect(parseMemFree('MemTotal:       24000000 kB\nMemFree:        1000 kB\n')).to.equal(1024000);
    expect(readFileSync('/proc/stat', 'utf8')).to.match(/^cpu /);
  });

  it('gives sane values on this machine: 0 to 100 %, free bytes within the total', () => {
    const a = sampleMachine();
    const b = sampleMachine();
    expect(cpuPercent(a, b)).to.be.within(0, 100);
    expect(b.freeMemory).to.be.above(0).and.at.most(totalmem());
  });
});
