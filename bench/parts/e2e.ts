// What a user of Ankaios times: the released `ank-server` and `ank` CLI (ANKAIOS_BIN), our agent and the
// released agent connected at once, each in turn, alternating. A busybox `httpd` on the host network is applied
// (→ it answers), updated (→ the new content answers), deleted (→ the port is closed, and its state is gone from
// the server: `ank get state`); then 100 sleepers are applied (→ all running) and deleted (→ all gone), with the CPU
// of the agent and of the runtime processes it ran (its waited-for children).
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Cluster, Proc, manifest } from '../../scripts/harness/ankaios.js';
import { BIN } from '../../scripts/harness/agent.js';
import { SLEEP_UNTIL_STOPPED } from '../../scripts/harness/podman.js';
import { beside, cpuMs, median, podmanServiceCpuMs, record, sleep } from '../report.js';

type Who = 'ours' | 'released';

/** A busybox httpd on the host network serving `content` on `port`; it ends at once on SIGTERM. */
export function webYaml(name: string, agent: string, port: number, content: string, image = 'localhost/busybox:latest', options: string[] = []): string {
  const script = `mkdir -p /www && echo ${content} > /www/index.html && trap 'exit 0' TERM && httpd -p 127.0.0.1:${port} -h /www && while true; do sleep 1 & wait; done`;
  return `  ${name}:
    runtime: podman
    agent: ${agent}
    runtimeConfig: |
      image: ${image}
      commandOptions: ${JSON.stringify(['--network=host', '--stop-timeout', '1', ...options])}
      commandArgs: ["/bin/sh", "-c", ${JSON.stringify(script)}]
`;
}

const sleeperYaml = (name: string, agent: string) => `  ${name}:
    runtime: podman
    agent: ${agent}
    runtimeConfig: |
      image: localhost/busybox:latest
      commandOptions: ["--stop-timeout", "1"]
      commandArgs: ["/bin/sh", "-c", ${JSON.stringify(SLEEP_UNTIL_STOPPED)}]
`;

/** What `GET /` on the port answers, or undefined while nothing answers. */
export function fetchBody(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 500 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(res.statusCode === 200 ? body.trim() : undefined));
      res.on('error', () => resolve(undefined));
    });
    req.on('error', () => resolve(undefined));
    req.on('timeout', () => req.destroy());
  });
}

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });

/** Polls `condition` every `everyMs` until it holds; resolves with the ms from `since`. */
export async function after(since: number, condition: () => Promise<boolean>, everyMs = 2, timeoutMs = 120_000): Promise<number> {
  while (!(await condition())) {
    if (performance.now() - since > timeoutMs) throw new Error('timed out');
    await sleep(everyMs);
  }
  return performance.now() - since;
}

/** Starts `ank --no-wait …` without waiting for it (the clock runs from here). */
export const ankNoWait = (cluster: Cluster, ...args: string[]) =>
  new Proc(spawn(`${process.env.ANKAIOS_BIN}/ank`, ['-k', '-s', cluster.url, '--no-wait', ...args]));

interface Single {
  apply: number;
  update: number;
  closed: number;
  gone: number;
}

async function singleOperations(cluster: Cluster, agent: string, port: number): Promise<Single> {
  const file = (content: string) => cluster.file(`web-${agent}-${content}.yaml`, manifest(webYaml('web', agent, port, content)));
  const v1 = file('v1');
  const v2 = file('v2');
  let t = performance.now();
  ankNoWait(cluster, 'apply', v1);
  const apply = await after(t, async () => (await fetchBody(port)) === 'v1');
  await cluster.waitFor('web', 'Running(Ok)');
  t = performance.now();
  ankNoWait(cluster, 'apply', v2);
  const update = await after(t, async () => (await fetchBody(port)) === 'v2');
  await cluster.waitFor('web', 'Running(Ok)');
  await sleep(500);
  t = performance.now();
  ankNoWait(cluster, 'delete', 'workload', 'web');
  const [closed, gone] = await Promise.all([
    after(t, async () => !(await portOpen(port))),
    after(t, async () => !(await cluster.states()).some((s) => s.agent === agent && s.workload === 'web'), 0),
  ]);
  return { apply, update, closed, gone };
}

/** One phase of the many-workloads part: its wall time, the agent's CPU, its runtime processes' CPU (all ms). */
interface Phase {
  readonly wall: number;
  readonly agentCpu: number;
  readonly runtimeCpu: number;
}

/**
 * Runs `ank <args>` and times it until `done`; the runtime processes' CPU counts once they are waited for (3 s
 * later), with the Podman service's where the agent has one (`ioFolder`).
 */
async function phase(cluster: Cluster, pid: number, args: string[], done: () => Promise<boolean>, ioFolder?: string): Promise<Phase> {
  const service = () => (ioFolder ? podmanServiceCpuMs(ioFolder) : 0);
  const before = { ...cpuMs(pid), service: service() };
  const t = performance.now();
  ankNoWait(cluster, ...args);
  const wall = await after(t, done, 50, 300_000);
  const ended = cpuMs(pid);
  await sleep(3000);
  return { wall, agentCpu: ended.own - before.own, runtimeCpu: cpuMs(pid).children - before.children + service() - before.service };
}

async function manyWorkloads(cluster: Cluster, agent: string, pid: number, n: number, ioFolder?: string): Promise<{ start: Phase; delete: Phase }> {
  const names = Array.from({ length: n }, (_, i) => `s${i}`);
  const text = manifest(...names.map((name) => sleeperYaml(name, agent)));
  const ours = async () => (await cluster.states()).filter((s) => s.agent === agent);
  const start = await phase(
    cluster,
    pid,
    ['apply', cluster.file(`many-${agent}.yaml`, text)],
    async () => {
      const states = await ours();
      return states.length === n && states.every((s) => s.state === 'Running');
    },
    ioFolder,
  );
  const del = await phase(cluster, pid, ['delete', 'workload', ...names], async () => (await ours()).length === 0, ioFolder);
  return { start, delete: del };
}

export async function benchEndToEnd(rounds: number, many: number): Promise<void> {
  console.log(`\n19. Under the released server and CLI: ours and the released agent in turn, ${rounds} rounds each, then ${many} workloads`);
  const cluster = new Cluster();
  try {
    await cluster.startServer();
    const ours = new Proc(spawn(BIN, ['-n', cluster.ours, '-s', cluster.url, '-k', '-r', cluster.runFolder('ours')]));
    cluster.ourAgent = ours;
    const theirs = cluster.startTheirs();
    await cluster.until(async () => (await cluster.agents()).length === 2, 'both agents to connect');
    const agents: Array<[Who, string, number]> = [
      ['ours', cluster.ours, ours.child.pid!],
      ['released', cluster.theirs, theirs.child.pid!],
    ];
    const singles = new Map<Who, Single[]>([
      ['ours', []],
      ['released', []],
    ]);
    let port = 18_200;
    for (let round = 0; round < rounds; round++) {
      for (const [who, agent] of round % 2 ? [...agents].reverse() : agents) singles.get(who)!.push(await singleOperations(cluster, agent, port++));
    }
    const row = (label: string, pick: (s: Single) => number, factor: number) => {
      const [o, r] = (['ours', 'released'] as const).map((who) => median(singles.get(who)!.map(pick)));
      beside(label, 'ms', o, r, factor);
    };
    row('ank apply → the workload answers HTTP', (s) => s.apply, 0.9);
    row('ank apply of a changed workload → the new one answers', (s) => s.update, 0.75);
    row('ank delete workload → port closed', (s) => s.closed, 0.7);
    row('ank delete workload → its state gone from the server', (s) => s.gone, 0.9);
    const results = new Map<Who, { start: Phase; delete: Phase }>();
    const ourIo = path.join(cluster.runFolder('ours'), `${cluster.ours}_io`);
    for (const [who, agent, pid] of agents) results.set(who, await manyWorkloads(cluster, agent, pid, many, who === 'ours' ? ourIo : undefined));
    const [o, r] = [results.get('ours')!, results.get('released')!];
    for (const [key, done] of [
      ['start', 'apply → all running'],
      ['delete', 'delete → all gone'],
    ] as const) {
      beside(`${many} workloads: ${done}`, 's', o[key].wall / 1000, r[key].wall / 1000, key === 'start' ? 0.6 : 0.5);
      const cpu = (p: Phase) => (p.agentCpu + p.runtimeCpu) / 1000;
      const agentCpu = `agent ${(o[key].agentCpu / 1000).toFixed(2)} s vs ${(r[key].agentCpu / 1000).toFixed(2)} s`;
      beside(`${many} workloads (${key}): agent + Podman CPU (its service included)`, 's', cpu(o[key]), cpu(r[key]), 0.5, agentCpu);
    }
    record({ name: 'agent CPU per create (ours)', value: o.start.agentCpu / many, unit: 'ms', target: '≤3' });
  } finally {
    await cluster.stopAll();
  }
}
