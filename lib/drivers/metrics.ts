// The metrics endpoint (--metrics): Prometheus text (or OpenMetrics when the scraper asks for it) from
// prom-client, served on a loopback port, an address given in full, or a unix socket. Loaded only when
// asked for. Series are per workload name and agent, never per instance id, and go with the workload.
import { existsSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import type { ExecutionState } from '../execution-state.js';
import { whenHeard } from '../heard-at.js';
import type { Logger } from '../logger.js';
import type { WorkloadState } from '../messages.js';
import type { ContainerFigures, MetricsPort } from '../ports.js';
import { parseInstanceKey } from '../workload.js';
import { checkSocketPlace } from './run-folder.js';
import { WorkloadHistogram } from './workload-histogram.js';

/** A podman call as the CLI saw it end. */
export interface PodmanCall {
  readonly subcommand: string;
  readonly outcome: 'ok' | 'failed' | 'deadline';
  readonly seconds: number;
}

/** One container's figures from `podman stats`, with the pod it is in (from `podman ps`), if any. */
export interface ContainerStats extends ContainerFigures {
  /** The pod it belongs to (a podman-kube workload's container). */
  readonly Pod?: string;
}

export interface MetricsOptions {
  readonly agentName: string;
  readonly version: string;
  readonly log: Logger;
  /** Every container's figures, asked once per scrape at most every STATS_TTL_MS. */
  readonly containerStats: () => Promise<readonly ContainerStats[]>;
  /** The workload of this agent a pod belongs to (a podman-kube workload's), if any. */
  readonly podOwner?: (pod: string) => string | undefined;
}

export interface MetricsEndpoint {
  readonly port: MetricsPort;
  /** Tells the endpoint a podman call ended (PodmanCli's observer). */
  podmanCall(call: PodmanCall): void;
  /** Tells the endpoint `podman events` was started again (the container cache's observer). */
  eventsRestarted(): void;
  /** Where it listens, as a URL or a socket path. */
  readonly where: string;
  close(): void;
}

/** How long the containers' figures of one `podman stats` serve scrapes. */
export const STATS_TTL_MS = 5000;
/** Scrapers at once; more wait in the kernel's backlog. */
/** How long a scraper may take to send its request (a slow one is cut off then). */
const CUT_OFF_MS = 10_000;
/** How many scrapes may wait for an exposition at once; more get 503. */
const MAX_WAITING = 1024;

/** `9100` (loopback), `host:port`, `[v6]:port`, or an absolute unix socket path. */
export function parseMetricsAddress(text: string): { readonly port: number; readonly host: string } | { readonly socket: string } {
  if (text.startsWith('/')) return { socket: text };
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[^:[\]]+):)?(\d{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : Number.NaN;
  if (!m || port < 1 || port > 65535)
    throw new Error(`The metrics address '${text}' is none: give a port (loopback), host:port, or the absolute path of a unix socket.`);
  return { port, host: (m[1] ?? '127.0.0.1').replace(/^\[|\]$/g, '') };
}

export async function startMetrics(address: string, options: MetricsOptions): Promise<MetricsEndpoint> {
  const where = parseMetricsAddress(address);
  const prom = await import('prom-client');
  const register = new prom.Registry<import('prom-client').RegistryContentType>();
  // The event-loop lag sampled every 100 ms (not 10): an idle agent stays idle.
  prom.collectDefaultMetrics({ register, eventLoopMonitoringPrecision: 100 });
  // Gauges named like counters, which Prometheus' own checker refuses; the rest of Node's figures stay.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) register.removeSingleMetric(name);
  const agent = options.agentName;
  const registers = [register];
  const gauge = (name: string, help: string, labelNames: readonly string[] = []) => new prom.Gauge({ name, help, labelNames, registers });
  const counter = (name: string, help: string, labelNames: readonly string[] = []) => new prom.Counter({ name, help, labelNames, registers });
  const perWorkload = ['workload', 'agent'];

  const info = gauge('ank_agent_info', 'The agent: its version and the protocol line of its server.', ['version', 'protocol_line']);
  const connected = gauge('ank_agent_server_connected', '1 while the agent is connected to its server.');
  const since = gauge('ank_agent_server_connected_since_seconds', 'When the current server connection came up (Unix time).');
  const reconnects = counter('ank_agent_server_reconnects_total', 'Server connections after the first.');
  const state = gauge('ank_agent_workload_state', 'The execution state the agent reports for a workload: 1 for its current state and substate.', [
    ...perWorkload,
    'state',
    'substate',
  ]);
  const restarts = counter('ank_agent_workload_restarts_total', 'Starts of a workload after it had ended.', perWorkload);
  const exitCode = gauge('ank_agent_workload_last_exit_code', "The exit code of a workload's last run.", perWorkload);
  const healthy = gauge('ank_agent_workload_healthy', '1 while a health-checked workload is healthy, 0 while it is not (yet).', perWorkload);
  const requests = counter('ank_agent_control_interface_requests_total', "Control Interface requests of a workload, by the authorizer's decision.", [
    'workload',
    'decision',
  ]);
  const logEntries = counter('ank_agent_log_entries_total', 'Log entries forwarded to the server.');
  const logBytes = counter('ank_agent_log_bytes_total', 'Bytes of the log entries forwarded to the server.');
  const logCut = counter('ank_agent_log_lines_cut_total', 'Log lines cut to fit a response.');
  const podmanCalls = counter('ank_agent_podman_calls_total', 'Podman calls, by subcommand and outcome (ok, failed, deadline: killed at it).', [
    'subcommand',
    'outcome',
  ]);
  const podmanSeconds = new prom.Histogram({
    name: 'ank_agent_podman_call_duration_seconds',
    help: 'How long podman calls took, by subcommand.',
    labelNames: ['subcommand'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120],
    registers,
  });
  const reportSeconds = new WorkloadHistogram(
    'ank_agent_workload_state_report_seconds',
    'From a container change (as Podman, conmon, a health check or a poll told it) to the state report that shows it.',
    [0.005, 0.025, 0.1, 0.5, 2.5],
    agent,
  );
  const eventRestarts = counter('ank_agent_podman_event_stream_restarts_total', 'Starts of `podman events` after the first (it ended, failed or stalled).');
  const containers = {
    cpu: gauge('ank_agent_container_cpu_percent', "A workload's container CPU use, % of one core (podman stats).", perWorkload),
    memory: gauge('ank_agent_container_memory_bytes', "A workload's container memory use.", perWorkload),
    memoryLimit: gauge('ank_agent_container_memory_limit_bytes', "A workload's container memory limit.", perWorkload),
    netIn: gauge('ank_agent_container_network_receive_bytes', "A workload's container bytes received.", perWorkload),
    netOut: gauge('ank_agent_container_network_transmit_bytes', "A workload's container bytes sent.", perWorkload),
    blockIn: gauge('ank_agent_container_block_read_bytes', "A workload's container bytes read from block devices.", perWorkload),
    blockOut: gauge('ank_agent_container_block_write_bytes', "A workload's container bytes written to block devices.", perWorkload),
    pids: gauge('ank_agent_container_pids', "A workload's container processes.", perWorkload),
  };

  /** What is known of each workload: its last state, when it came, and whether it ended since it last ran (for the restarts). */
  const last = new Map<string, { readonly state: ExecutionState; readonly at: number; readonly ended: boolean }>();
  info.set({ version: options.version, protocol_line: '' }, 1);
  /** A workload Removed for this long is gone (a restart's Removed is followed by its new start at once): its series go. */
  const forgetAfterMs = 10_000;
  const forgetRemoved = () => {
    for (const [name, known] of last) {
      if (known.state.state !== 'Removed' || Date.now() - known.at < forgetAfterMs) continue;
      last.delete(name);
      for (const m of [restarts, exitCode, healthy, ...Object.values(containers)]) m.remove({ workload: name, agent });
      reportSeconds.remove(name);
    }
  };
  let connections = 0;
  const port: MetricsPort = {
    connection(online, line) {
      connected.set(online ? 1 : 0);
      if (!online) return;
      if (++connections > 1) reconnects.inc();
      since.set(Date.now() / 1000);
      info.reset();
      info.set({ version: options.version, protocol_line: line ?? '' }, 1);
    },
    states(states: readonly WorkloadState[]) {
      for (const { instanceName, executionState: s } of states) {
        if (instanceName.agentName !== agent) continue;
        const workload = { workload: instanceName.workloadName, agent };
        const before = last.get(instanceName.workloadName);
        if (before) state.remove({ ...workload, state: before.state.state, substate: before.state.substate });
        if (s.state !== 'Removed') state.set({ ...workload, state: s.state, substate: s.substate }, 1);
        // A start after an end (an exit, then maybe stopping, removed, a back-off) is a restart.
        const starts = s.state === 'Pending' && s.substate === 'Starting';
        if (starts && before?.ended) restarts.inc(workload);
        const ended = !starts && (s.state === 'Succeeded' || s.state === 'Failed' || (s.state !== 'Running' && (before?.ended ?? false)));
        const heard = whenHeard(s);
        if (heard !== undefined) reportSeconds.observe(instanceName.workloadName, Math.max(0, Date.now() - heard) / 1000);
        if (s.exitCode !== undefined) exitCode.set(workload, s.exitCode);
        // A workload without a check is Running(Ok) too: healthy only after its check was awaited.
        if (s.health === 'starting' || s.health === 'unhealthy') healthy.set(workload, 0);
        else if (s.health === 'healthy' && before?.state.health === 'starting') healthy.set(workload, 1);
        last.set(instanceName.workloadName, { state: s, at: Date.now(), ended });
      }
    },
    authorized(workloadName, allowed) {
      requests.inc({ workload: workloadName, decision: allowed ? 'allowed' : 'denied' });
    },
    logEntries(count, bytes, cut) {
      logEntries.inc(count);
      logBytes.inc(bytes);
      if (cut > 0) logCut.inc(cut);
    },
  };

  // The containers' figures, asked for by a scrape, one `podman stats` at a time, kept for a few seconds.
  let stats: { at: number; asked: Promise<void> } | undefined;
  const refreshStats = () => {
    if (stats && Date.now() - stats.at < STATS_TTL_MS) return stats.asked;
    const asked = options
      .containerStats()
      .then((all) => {
        for (const gauge of Object.values(containers)) gauge.reset();
        for (const [workload, c] of byWorkload(all, agent, options.podOwner)) {
          if (!last.has(workload)) continue;
          const labels = { workload, agent };
          containers.cpu.set(labels, c.CPU);
          containers.memory.set(labels, c.MemUsage);
          containers.memoryLimit.set(labels, c.MemLimit);
          containers.netIn.set(labels, c.NetInput);
          containers.netOut.set(labels, c.NetOutput);
          containers.blockIn.set(labels, c.BlockInput);
          containers.blockOut.set(labels, c.BlockOutput);
          containers.pids.set(labels, c.PIDs);
        }
      })
      .catch((err: unknown) => options.log.debug(`The containers' figures are not available now: ${String(err)}`));
    stats = { at: Date.now(), asked };
    return asked;
  };

  // One exposition at a time (the content type is the registry's), and scrapes that come while one of their
  // type is rendered share it: a burst of scrapers costs one render, not one each.
  let rendering: Promise<unknown> = Promise.resolve();
  const underWay = new Map<unknown, Promise<string>>();
  type ContentType = import('prom-client').RegistryContentType;
  const exposition = (contentType: ContentType): Promise<string> => {
    const shared = underWay.get(contentType);
    if (shared) return shared;
    const rendered = rendering
      .then(() => {
        forgetRemoved();
        return refreshStats();
      })
      .then(() => {
        register.setContentType(contentType);
        return register.metrics();
      })
      .then((text) => withFamily(text, reportSeconds.render(), contentType === prom.Registry.OPENMETRICS_CONTENT_TYPE))
      .finally(() => underWay.delete(contentType));
    underWay.set(contentType, rendered);
    rendering = rendered.catch(() => undefined);
    return rendered;
  };
  let waiting = 0;
  const server = http.createServer({ connectionsCheckingInterval: 1000, headersTimeout: CUT_OFF_MS, requestTimeout: CUT_OFF_MS }, (req, res) => {
    if (req.method !== 'GET' || !/^\/metrics(\?|$)/.test(req.url ?? '')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found: the metrics are at /metrics\n');
      return;
    }
    // Past this many scrapes waiting, one more is told to come back (never reset): memory stays bounded.
    if (waiting >= MAX_WAITING) {
      res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '1' }).end('Too many scrapes at once; try again.\n');
      return;
    }
    const contentType = /application\/openmetrics-text/.test(req.headers.accept ?? '')
      ? prom.Registry.OPENMETRICS_CONTENT_TYPE
      : prom.Registry.PROMETHEUS_CONTENT_TYPE;
    waiting += 1;
    exposition(contentType)
      .then(
        (text) => res.writeHead(200, { 'content-type': contentType }).end(text),
        (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(err)}\n`),
      )
      .finally(() => (waiting -= 1));
  });
  // A slow or stalled scraper is cut off (checked every second, not Node's 30 s); it holds nothing of the
  // agent's but its socket, and takes no other scraper's place.
  server.keepAliveTimeout = 5_000;
  await listen(server, where);
  const shown = 'socket' in where ? where.socket : `http://${where.host.includes(':') ? `[${where.host}]` : where.host}:${where.port}/metrics`;
  options.log.info(`Metrics at ${shown}.`);
  return {
    port,
    where: shown,
    podmanCall({ subcommand, outcome, seconds }) {
      podmanCalls.inc({ subcommand, outcome });
      podmanSeconds.observe({ subcommand }, seconds);
    },
    eventsRestarted: () => eventRestarts.inc(),
    close: () => server.close(),
  };
}

type Figures = Omit<ContainerStats, 'Name' | 'Pod'>;

/**
 * The containers' figures by workload of this agent: a podman workload's container by its name, a
 * podman-kube workload's containers by their pod, summed; the memory limit is the largest of theirs, and the
 * network the pod's own (its containers share it, so each shows all of it).
 */
function byWorkload(all: readonly ContainerStats[], agent: string, podOwner?: (pod: string) => string | undefined): Map<string, Figures> {
  const figures = new Map<string, Figures>();
  // A pod's owner is asked once, however many containers it has.
  const owners = new Map<string, string | undefined>();
  const ownerOf = (pod: string) => (owners.has(pod) ? owners.get(pod) : owners.set(pod, podOwner?.(pod)).get(pod));
  for (const c of all) {
    const named = parseInstanceKey(c.Name);
    const workload = named ? (named.agentName === agent ? named.workloadName : undefined) : c.Pod ? ownerOf(c.Pod) : undefined;
    if (workload === undefined) continue;
    const sum = figures.get(workload);
    figures.set(
      workload,
      sum
        ? {
            CPU: sum.CPU + c.CPU,
            MemUsage: sum.MemUsage + c.MemUsage,
            MemLimit: Math.max(sum.MemLimit, c.MemLimit),
            NetInput: Math.max(sum.NetInput, c.NetInput),
            NetOutput: Math.max(sum.NetOutput, c.NetOutput),
            BlockInput: sum.BlockInput + c.BlockInput,
            BlockOutput: sum.BlockOutput + c.BlockOutput,
            PIDs: sum.PIDs + c.PIDs,
          }
        : c,
    );
  }
  return figures;
}

/** A family rendered outside the registry, added to its exposition (before OpenMetrics' closing `# EOF`). */
function withFamily(exposition: string, family: string, openMetrics: boolean): string {
  if (!openMetrics) return `${exposition}\n${family}\n`;
  const end = exposition.lastIndexOf('# EOF');
  return `${exposition.slice(0, end)}${family}\n# EOF\n`;
}

function listen(server: http.Server, where: ReturnType<typeof parseMetricsAddress>): Promise<void> {
  if ('socket' in where) {
    // The run folder's rule: no other user can swap the socket or lead the path elsewhere. A socket of
    // root's or the agent's, left by an earlier run, is replaced; anything else there is not touched.
    try {
      checkSocketPlace(where.socket);
    } catch (err) {
      return Promise.reject(err);
    }
    if (existsSync(where.socket)) unlinkSync(where.socket);
  }
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      resolve();
    };
    if ('socket' in where) server.listen(where.socket, done);
    else server.listen(where.port, where.host, done);
  });
}
