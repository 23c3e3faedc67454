import { closeSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { create } from '@bufbuild/protobuf';
import { firstValueFrom } from 'rxjs';
import { ResponseSchema } from '../../proto/gen/ank_base_pb.js';
import { controlInterfaceFolder } from '../../lib/drivers/run-folder.js';
import { ControlInterfaceHub } from '../../scripts/harness/control-interfaces.js';
import { silentLogger } from '../../lib/logger.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';
import { addedWorkload, reportedStates } from '../../scripts/harness/fake-server.js';
import { workload } from '../../scripts/harness/fixtures.js';
import { median, record } from '../report.js';
import { busybox } from '../../scripts/harness/podman.js';
import { shippedAgent, until, cpuTicks } from '../measure.js';
import { specFolder } from '../../scripts/harness/temp.js';

export async function benchControlInterface(count: number): Promise<void> {
  console.log('\n5. Control Interface round trip (FIFOs → agent → fake server → agent → FIFOs)');
  const io = specFolder('ank-bench-ci-');
  const hub = new ControlInterfaceHub(io, silentLogger);
  const spec = {
    ...workload('bench'),
    controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] },
  };
  // The fake server answers every request at once.
  const answering = hub.requests$.subscribe((r) =>
    hub.deliver(create(ResponseSchema, { requestId: r.requestId, ResponseContent: { case: 'completeStateResponse', value: {} } })),
  );
  const { controlInterfacePath } = await firstValueFrom(hub.prepare(spec));
  const client = new ControlInterfaceClient(controlInterfacePath!);
  client.hello();
  await client.next();
  const rtts: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    client.askState(`r${i}`, 'desiredState');
    await client.next();
    rtts.push(performance.now() - t);
  }
  const seconds = (performance.now() - t0) / 1000;
  record({ name: `round trip, median (${count} sequential requests)`, value: median(rtts), unit: 'ms' });
  record({ name: 'requests per second, one at a time', value: count / seconds, unit: '/s' });
  client.close();
  answering.unsubscribe();
  hub.closeAll();
}

/** What a workload writing garbage into its Control Interface costs the agent, per MiB. */
/**
 * What a workload's garbage costs the running agent: 16 MiB written into its Control Interface output FIFO
 * (blocking writes: they go as fast as the agent reads), timed, and the agent's CPU for them.
 */
export async function benchFraming(): Promise<void> {
  console.log('\nControl Interface framing under garbage (written into a FIFO of the running agent)');
  const mib = 1024 * 1024;
  const inputs: Array<[string, Buffer]> = [
    ['the crafted 0x88 0x7f pattern', Buffer.from(Uint8Array.from({ length: mib }, (_, i) => (i % 2 === 0 ? 0x88 : 0x7f)))],
    ['random bytes', Buffer.from(Uint8Array.from({ length: mib }, () => Math.floor(Math.random() * 256)))],
  ];
  const { run, agentName, server, child, end } = await shippedAgent('framing');
  try {
    const stream = await server.nextStream();
    const noisy = {
      ...busybox('noisy', agentName),
      controlInterfaceAccess: { allowRules: [{ kind: 'state' as const, operation: 'Read' as const, filterMasks: ['*'] }], denyRules: [] },
    };
    stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [addedWorkload(noisy)] } } });
    await until(() => reportedStates(stream).some(([w, , st]) => w === 'noisy' && st === 'Running(Ok)'));
    const output = path.join(controlInterfaceFolder(path.join(run, `${agentName}_io`), noisy), 'output');
    for (const [name, chunk] of inputs) {
      const fd = openSync(output, 'w');
      const ticks = cpuTicks(child.pid!);
      const t = performance.now();
      for (let i = 0; i < 16; i++) writeSync(fd, chunk);
      closeSync(fd);
      // The last bytes are read once the writes returned, the pipe's 64 KiB at most.
      const seconds = (performance.now() - t) / 1000;
      record({
        name: `framing of ${name} in the running agent`,
        value: 16 / seconds,
        unit: 'MiB/s',
        note: `agent CPU ${((cpuTicks(child.pid!) - ticks) * 10) / 16} ms per MiB`,
      });
    }
  } finally {
    end();
  }
}
