// The process driver of the specs' and benchmarks' CLIs: one per test process, as the agent's run has one, disposed
// when the test process exits (its launcher shell ended, its folder of call files removed).
import { asyncScheduler } from 'rxjs';
import { Processes } from '../../lib/drivers/processes.js';
import { Cli, type CliOptions } from '../../lib/runtimes/base/cli.js';

let shared: Processes | undefined;

export function harnessProcesses(): Processes {
  if (shared === undefined) {
    const made = new Processes();
    process.once('exit', () => made.dispose());
    shared = made;
  }
  return shared;
}

/** A runner of `binary` on the harness's processes and the run's clock (the async scheduler's unless given). */
export const harnessCli = (binary: string, options: Omit<CliOptions, 'binary' | 'processes' | 'clock'> & Partial<Pick<CliOptions, 'clock'>> = {}): Cli =>
  new Cli({ clock: asyncScheduler, ...options, binary, processes: harnessProcesses() });
