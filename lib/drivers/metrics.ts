// The metrics endpoint (--metrics): Prometheus text (or OpenMetrics when the scraper asks for it) from
// prom-client, served on a loopback port, an address given in full, or a unix socket. Loaded only when
// asked for. Series are per workload name and agent, never per instance id, and go with the workload.
import { existsSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import type { Counter, Registry, RegistryContentType } from 'prom-client';

import type { Logger } from '../logger.js';
import { type MetricsEvent, type MetricsFigures, byWorkload, forgetRemoved, noFigures, stepFigures, type WorkloadContainerFigures } from '../metrics.js';
import { checkSocketPlace } from './run-folder.js';
import { WorkloadHistogram } from './workload-histogram.js';
import type { Figures } from '../metrics.js';

export interface MetricsOptions {
  readonly agentName: string;
  readonly version: string;
  readonly log: Logger;
  /** The figures of the containers of the agent's workloads, asked once per scrape at most every STATS_TTL_MS. */
  readonly containerStats: () => Promise<readonly WorkloadContainerFigures[]>;
}

export interface MetricsEndpoint {
  /** Takes in what the agent (its metrics$ sink) or a driver tells. */
  apply(event: MetricsEvent): void;
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

/** The endpoint: the figures the events add up to, rendered into a registry for each scrape, served over HTTP. */
export async function startMetrics(address: string, options: MetricsOptions): Promise<MetricsEndpoint> {
  const where = parseMetricsAddress(address);
  const prom = await import('prom-client');
  const register = new prom.Registry<RegistryContentType>();
  // The event-loop lag sampled every 100 ms (not 10): an idle agent stays idle.
  prom.collectDefaultMetrics({ register, eventLoopMonitoringPrecision: 100 });
  // Gauges named like counters, which Prometheus' own checker refuses; the rest of Node's figures stay.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) register.removeSingleMetric(name);
  const f = families(prom, register, options.agentName);
  let figures = noFigures(options.agentName);
  const stats = statsCache(options);
  const exposition = expositions(
    register,
    async (contentType) => {
      const before = figures;
      figures = forgetRemoved(figures, Date.now());
      for (const name of before.workloads.keys()) if (!figures.workloads.has(name)) f.reportSeconds.remove(name);
      render(f, figures, options.version, byWorkload(await stats()));
      return contentType === prom.Registry.OPENMETRICS_CONTENT_TYPE;
    },
    f.reportSeconds,
  );
  const server = await serve(where, (contentType) => exposition(contentType), prom.Registry);
  const shown = 'socket' in where ? where.socket : `http://${where.host.includes(':') ? `[${where.host}]` : where.host}:${where.port}/metrics`;
  options.log.info(`Metrics at ${shown}.`);
  return {
    where: shown,
    apply(event) {
      figures = stepFigures(figures, event, Date.now());
      observe(f, event, options.agentName);
    },
    close: () => server.close(),
  };
}

type Prom = typeof import('prom-client');

/** The metric families; `reportSeconds` is rendered by hand (lib/drivers/workload-histogram.ts says why). */
function families(prom: Prom, register: Registry<RegistryContentType>, agent: string) {
  const registers = [register];
  const gauge = (name: string, help: string, labelNames: readonly string[] = []) => new prom.Gauge({ name, help, labelNames, registers });
  const counter = (name: string, help: string, labelNames: readonly string[] = []) => new prom.Counter({ name, help, labelNames, registers });
  const perWorkload = ['workload', 'agent'];
  const container = (what: string, help: string) => gauge(`ank_agent_container_${what}`, `A workload's container ${help}`, perWorkload);
  return {
    info: gauge('ank_agent_info', 'The agent: its version and the protocol line of its server.', ['version', 'protocol_line']),
    connected: gauge('ank_agent_server_connected', '1 while the agent is connected to its server.'),
    since: gauge('ank_agent_server_connected_since_seconds', 'When the current server connection came up (Unix time).'),
    reconnects: counter('ank_agent_server_reconnects_total', 'Server connections after the first.'),
    state: gauge('ank_agent_workload_state', 'The execution state the agent reports for a workload: 1 for its current state and substate.', [
      ...perWorkload,
      'state',
      'substate',
    ]),
    restarts: counter('ank_agent_workload_restarts_total', 'Starts of a workload after it had ended.', perWorkload),
    exitCode: gauge('ank_agent_workload_last_exit_code', "The exit code of a workload's last run.", perWorkload),
    healthy: gauge('ank_agent_workload_healthy', '1 while a health-checked workload is healthy, 0 while it is not (yet).', perWorkload),
    requests: counter('ank_agent_control_interface_requests_total', "Control Interface requests of a workload, by the authorizer's decision.", [
      'workload',
      'decision',
    ]),
    logEntries: counter('ank_agent_log_entries_total', 'Log entries forwarded to the server.'),
    logBytes: counter('ank_agent_log_bytes_total', 'Bytes of the log entries forwarded to the server.'),
    logCut: counter('ank_agent_log_lines_cut_total', 'Log lines cut to fit a response.'),
    cliCalls: counter('ank_agent_podman_calls_total', 'Podman calls, by subcommand and outcome (ok, failed, deadline: killed at it).', [
      'subcommand',
      'outcome',
    ]),
    cliSeconds: new prom.Histogram({
      name: 'ank_agent_podman_call_duration_seconds',
      help: 'How long podman calls took, by subcommand.',
      labelNames: ['subcommand'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120],
      registers,
    }),
    reportSeconds: new WorkloadHistogram(
      'ank_agent_workload_state_report_seconds',
      'From a container change (as Podman, conmon, a health check or a poll told it) to the state report that shows it.',
      [0.005, 0.025, 0.1, 0.5, 2.5],
      agent,
    ),
    eventRestarts: counter('ank_agent_podman_event_stream_restarts_total', 'Starts of `podman events` after the first (it ended, failed or stalled).'),
    imagesRemoved: counter('ank_agent_images_removed_total', 'Images the agent pulled and removed once no container used them, by engine.', ['engine']),
    imageStoreUsed: gauge('ank_agent_image_store_used_ratio', "How full the image store's filesystem was when last looked at (0 to 1), by engine.", ['engine']),
    containers: {
      cpu: container('cpu_percent', 'CPU use, % of one core (podman stats).'),
      memory: container('memory_bytes', 'memory use.'),
      memoryLimit: container('memory_limit_bytes', 'memory limit.'),
      netIn: container('network_receive_bytes', 'bytes received.'),
      netOut: container('network_transmit_bytes', 'bytes sent.'),
      blockIn: container('block_read_bytes', 'bytes read from block devices.'),
      blockOut: container('block_write_bytes', 'bytes written to block devices.'),
      pids: container('pids', 'processes.'),
    },
  };
}

type Families = ReturnType<typeof families>;

/** What is observed as it happens, not added up in the figures: how long CLI calls took, and how soon a change was reported. */
function observe(f: Families, event: MetricsEvent, agent: string): void {
  if (event.kind === 'cliCall' && event.call.cli === 'podman') {
    f.cliCalls.inc({ subcommand: event.call.subcommand, outcome: event.call.outcome });
    f.cliSeconds.observe({ subcommand: event.call.subcommand }, event.call.seconds);
  }
  if (event.kind !== 'states') return;
  for (const { instanceName, executionState } of event.states) {
    const heard = executionState.heardAt;
    if (instanceName.agentName === agent && heard !== undefined) f.reportSeconds.observe(instanceName.workloadName, Math.max(0, Date.now() - heard) / 1000);
  }
}

/** Sets a counter to a total the figures keep (a series only once it counted something). */
const total = (c: Counter, value: number, labels: Record<string, string> = {}) => value > 0 && c.inc(labels, value);

/** The figures into the families, series by series, for one exposition. */
function render(f: Families, figures: MetricsFigures, version: string, containers: ReadonlyMap<string, Figures>): void {
  const agent = figures.agentName;
  f.info.reset();
  f.info.set({ version, protocol_line: figures.line }, 1);
  f.connected.set(figures.online ? 1 : 0);
  if (figures.since !== undefined) f.since.set(figures.since / 1000);
  for (const m of [
    f.reconnects,
    f.requests,
    f.logEntries,
    f.logBytes,
    f.logCut,
    f.eventRestarts,
    f.imagesRemoved,
    f.imageStoreUsed,
    f.state,
    f.restarts,
    f.exitCode,
    f.healthy,
  ] as const)
    m.reset();
  total(f.reconnects, figures.connections - 1);
  total(f.logEntries, figures.log.entries);
  total(f.logBytes, figures.log.bytes);
  total(f.logCut, figures.log.cut);
  total(f.eventRestarts, figures.eventsRestarts);
  for (const [engine, { removed, usedRatio }] of figures.images) {
    total(f.imagesRemoved, removed, { engine });
    if (usedRatio !== undefined) f.imageStoreUsed.set({ engine }, usedRatio);
  }
  for (const [workload, { allowed, denied }] of figures.requests) {
    total(f.requests, allowed, { workload, decision: 'allowed' });
    total(f.requests, denied, { workload, decision: 'denied' });
  }
  for (const [workload, w] of figures.workloads) {
    const labels = { workload, agent };
    if (w.state.state !== 'Removed') f.state.set({ ...labels, state: w.state.state, substate: w.state.substate }, 1);
    total(f.restarts, w.restarts, labels);
    if (w.exitCode !== undefined) f.exitCode.set(labels, w.exitCode);
    if (w.healthy !== undefined) f.healthy.set(labels, w.healthy);
  }
  renderContainers(f.containers, figures, containers);
}

/** The containers' figures of the workloads the figures know. */
function renderContainers(c: Families['containers'], figures: MetricsFigures, all: ReadonlyMap<string, Figures>): void {
  for (const gauge of Object.values(c)) gauge.reset();
  for (const [workload, s] of all) {
    if (!figures.workloads.has(workload)) continue;
    const labels = { workload, agent: figures.agentName };
    c.cpu.set(labels, s.CPU);
    c.memory.set(labels, s.MemUsage);
    c.memoryLimit.set(labels, s.MemLimit);
    c.netIn.set(labels, s.NetInput);
    c.netOut.set(labels, s.NetOutput);
    c.blockIn.set(labels, s.BlockInput);
    c.blockOut.set(labels, s.BlockOutput);
    c.pids.set(labels, s.PIDs);
  }
}

/** The containers' figures, one look at a time, kept STATS_TTL_MS; none when they cannot be had now. */
function statsCache(options: MetricsOptions): () => Promise<readonly WorkloadContainerFigures[]> {
  let last: { at: number; asked: Promise<readonly WorkloadContainerFigures[]> } | undefined;
  return () => {
    if (last && Date.now() - last.at < STATS_TTL_MS) return last.asked;
    const asked = options.containerStats().catch((err: unknown) => {
      options.log.debug(`The containers' figures are not available now: ${String(err)}`);
      return [];
    });
    last = { at: Date.now(), asked };
    return asked;
  };
}

/**
 * One exposition at a time (the content type is the registry's), and scrapes that come while one of their
 * type is rendered share it: a burst of scrapers costs one render, not one each. `prepare` renders the
 * figures and says whether the type is OpenMetrics.
 */
function expositions(register: Registry<RegistryContentType>, prepare: (contentType: RegistryContentType) => Promise<boolean>, byHand: WorkloadHistogram) {
  let rendering: Promise<unknown> = Promise.resolve();
  const underWay = new Map<RegistryContentType, Promise<string>>();
  return (contentType: RegistryContentType): Promise<string> => {
    const shared = underWay.get(contentType);
    if (shared) return shared;
    const rendered = rendering
      .then(async () => {
        const openMetrics = await prepare(contentType);
        register.setContentType(contentType);
        return withFamily(await register.metrics(), byHand.render(), openMetrics);
      })
      .finally(() => underWay.delete(contentType));
    underWay.set(contentType, rendered);
    rendering = rendered.catch(() => undefined);
    return rendered;
  };
}

/**
 * The HTTP server of /metrics. A slow or stalled scraper is cut off (checked every second, not Node's 30 s);
 * it holds nothing of the agent's but its socket, and takes no other scraper's place.
 */
async function serve(
  where: ReturnType<typeof parseMetricsAddress>,
  exposition: (contentType: RegistryContentType) => Promise<string>,
  types: Prom['Registry'],
): Promise<http.Server> {
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
    const contentType = /application\/openmetrics-text/.test(req.headers.accept ?? '') ? types.OPENMETRICS_CONTENT_TYPE : types.PROMETHEUS_CONTENT_TYPE;
    waiting += 1;
    exposition(contentType)
      .then(
        (text) => res.writeHead(200, { 'content-type': contentType }).end(text),
        (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(err)}\n`),
      )
      .finally(() => (waiting -= 1));
  });
  server.keepAliveTimeout = 5_000;
  await listen(server, where);
  return server;
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
