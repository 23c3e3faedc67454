// What the run lets go of: the runtimes it made and its process driver, disposed, leave no process, socket or
// timer of theirs behind (the workloads themselves run on, as they should when the agent ends).
import { expect } from 'chai';
import { filter, firstValueFrom, lastValueFrom } from 'rxjs';
import { makeRuntimes } from '../../bin/wiring.js';
import { Processes } from '../../lib/drivers/processes.js';
import { silentLogger } from '../../lib/logger.js';
import { podmanModule } from '../../lib/runtimes/podman/index.js';
import { busybox, cleanup, requirePodman, specService, uniqueAgent } from '../../scripts/harness/podman.js';
import { specFolder } from '../../scripts/harness/temp.js';
import { until } from '../../scripts/harness/wait.js';
import { children, handles, more, sockets } from '../../scripts/harness/leftovers.js';

describe("the run's dispose (real Podman, through the specs' Podman service)", function () {
  this.timeout(120_000);
  before(requirePodman);
  const agentName = uniqueAgent('dispose');
  after(() => cleanup(agentName));

  it('leaves no process, socket or timer of the runtimes or the process driver once a workload was created, watched and deleted', async () => {
    const service = specService();
    if (service) await until(() => 'socket' in service.reach(), "the specs' service up");
    // Settled: what the harness and mocha hold before the run.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const [before, beforeChildren, beforeSockets] = [handles(), children(), sockets()];
    const processes = new Processes();
    const made = makeRuntimes(silentLogger, { processes, folder: specFolder('ank-dispose-'), modules: [podmanModule({ service })] });
    const podman = made.connectors.get('podman')!;
    const spec = busybox('kept', agentName);
    const id = await lastValueFrom(podman.createWorkload(spec, {}));
    await firstValueFrom(podman.checkState(id, spec).pipe(filter((s) => s.state === 'Running')));
    await lastValueFrom(podman.deleteWorkload(id), { defaultValue: undefined });
    const [duringChildren, duringSockets] = [children(), sockets()];
    made.dispose();
    processes.dispose();
    await until(() => Object.keys(more(before, handles())).length === 0, 'the handles of the run gone', 5000).catch(() => undefined);
    expect(more(before, handles()), 'handles left by the run').to.deep.equal({});
    expect(
      children().filter((pid) => !beforeChildren.includes(pid)),
      'processes left by the run',
    ).to.deep.equal([]);
    // The spec can fail: the run held processes and sockets of its own while it ran (its launcher shell, Podman's
    // events; counted by identity: other specs' handles come and go around it).
    expect(duringChildren.filter((pid) => !beforeChildren.includes(pid)).length, 'processes the run held').to.be.greaterThan(0);
    expect(
      duringSockets.filter((s) => !beforeSockets.includes(s)).length,
      'sockets the run held (its launcher, its connections to the service)',
    ).to.be.greaterThan(0);
  });
});
