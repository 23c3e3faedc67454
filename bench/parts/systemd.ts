// Bench part: the systemd runtime (real systemd, PID 1 of a Podman container), on the agent as shipped against
// a loopback server. A unit killed from outside → Failed(ExecFailed) received by the server, timed from the
// moment systemd put the unit into `failed` (its InactiveEnterTimestampMonotonic, the same kernel clock as the
// server's); with systemd's news (the bus bridge), and without it (the bridge not found: a `systemctl show` of all
// units every 500 ms, as the released proposal's poller). And the systemctl processes a second with 20 idle units.
import { addedWorkload } from '../../scripts/harness/fake-server.js';
import { spec } from '../../scripts/harness/podman.js';
import { SystemdHost, requireSystemd } from '../../scripts/harness/systemd.js';
import { latestStates, shippedAgent, until } from '../measure.js';
import { median, p95, record, sleep } from '../report.js';

const IDLE_UNITS = 20;

const unitWorkload = (name: string, agentName: string, unit: string) => spec(name, agentName, 'systemd', `serviceName: ${unit}\n`);

export async function benchSystemd(kills: number, idleSeconds: number): Promise<void> {
  console.log(`\nsystemd: a unit killed → Failed(ExecFailed) at the server (${kills} kills); systemctl calls with ${IDLE_UNITS} idle units`);
  requireSystemd();
  const host = await SystemdHost.start();
  try {
    host.install({ 'victim@.service': 'ExecStart=/bin/sleep 3600', 'idle@.service': 'ExecStart=/bin/sleep 3600' });
    for (const [label, bin, target, idleTarget] of [
      ["systemd's news", host.bin, '<50', '<0.1'],
      ['the bridge not found: a 500 ms systemctl show poller', host.binWithout('systemd-stdio-bridge'), undefined, undefined],
    ] as const) {
      const { agentName, server, end } = await shippedAgent('sd', [], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
      try {
        const stream = await server.nextStream();
        const latest = latestStates(stream);
        const failedAt = new Map<string, number>();
        stream.events.on('message', () => {
          const now = Number(process.hrtime.bigint() / 1000n);
          for (const [workload, state] of latest) if (state.startsWith('Failed(ExecFailed)') && !failedAt.has(workload)) failedAt.set(workload, now);
        });
        const idle = Array.from({ length: IDLE_UNITS }, (_, i) => unitWorkload(`idle${i}`, agentName, `idle@${i}.service`));
        const victims = Array.from({ length: kills }, (_, i) => unitWorkload(`victim${i}`, agentName, `victim@${i}.service`));
        stream.send({ FromServerEnum: { case: 'serverHello', value: { addedWorkloads: [...idle, ...victims].map(addedWorkload) } } });
        await until(() => [...idle, ...victims].every((w) => latest.get(w.instanceName.workloadName) === 'Running(Ok)'), 120_000);
        await sleep(2000);
        const before = host.calls('systemctl');
        await sleep(idleSeconds * 1000);
        const perSecond = (host.calls('systemctl') - before) / idleSeconds;
        record({ name: `systemctl processes a second, ${IDLE_UNITS} idle units (${label})`, value: perSecond, unit: '/s', target: idleTarget });
        const latencies: number[] = [];
        for (let i = 0; i < kills; i++) {
          const unit = `victim@${i}.service`;
          host.exec('systemctl', 'kill', '--signal=KILL', unit);
          await until(() => failedAt.has(`victim${i}`), 30_000);
          const failed = Number(host.property(unit, 'InactiveEnterTimestampMonotonic'));
          latencies.push((failedAt.get(`victim${i}`)! - failed) / 1000);
          await sleep(300);
        }
        record({ name: `unit killed → Failed at the server, median (${label})`, value: median(latencies), unit: 'ms', target });
        record({ name: `unit killed → Failed at the server, p95 (${label})`, value: p95(latencies), unit: 'ms' });
      } finally {
        end();
        host.exec('sh', '-c', 'systemctl stop "victim@*.service" "idle@*.service"; systemctl reset-failed; true');
      }
    }
  } finally {
    host.stop();
  }
}
