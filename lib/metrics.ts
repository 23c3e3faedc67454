// What the metrics endpoint shows, as data: the events the agent and its drivers emit for it, and the
// figures they add up to (a pure reducer). lib/drivers/metrics.ts only renders the figures for a scrape.
import type { ExecutionState } from './execution-state.js';
import type { WorkloadState } from './messages.js';
import type { ContainerFigures } from './ports.js';

/** A podman (or nerdctl) call as the CLI saw it end. */
export interface CliCall {
  /** The CLI's name (`podman`, `nerdctl`): the families count Podman's. */
  readonly cli: string;
  readonly subcommand: string;
  readonly outcome: 'ok' | 'failed' | 'deadline';
  readonly seconds: number;
  /** The way it took where the CLI has a route (a service, or the CLI and why); none: a process of its own. */
  readonly via?: string;
}

export type MetricsEvent =
  /** The server connection came up (with the line it speaks) or went. */
  | { readonly kind: 'connection'; readonly online: boolean; readonly line?: string }
  /** States the agent reports for its workloads. */
  | { readonly kind: 'states'; readonly states: readonly WorkloadState[] }
  /** A workload's Control Interface request was allowed or denied. */
  | { readonly kind: 'authorized'; readonly workloadName: string; readonly allowed: boolean }
  /** Log entries forwarded to the server, their bytes, and the lines among them cut to fit. */
  | { readonly kind: 'logEntries'; readonly count: number; readonly bytes: number; readonly cut: number }
  /** A call of the container CLI ended (the drivers'). */
  | { readonly kind: 'cliCall'; readonly call: CliCall }
  /** An engine's event stream was started again by its container cache (the families count Podman's). */
  | { readonly kind: 'eventsRestarted'; readonly engine: string }
  /** The image collector removed an image the agent pulled, or looked at how full an engine's image store is. */
  | { readonly kind: 'images'; readonly engine: string; readonly removed?: number; readonly usedRatio?: number };

/** What the figures know of a workload. */
export interface WorkloadFigures {
  /** Its last state, and when it came (ms). */
  readonly state: ExecutionState;
  readonly at: number;
  /** It ended (an exit, then maybe stopping, removed, a back-off) since it last ran: its next start is a restart. */
  readonly ended: boolean;
  readonly restarts: number;
  readonly exitCode?: number;
  /** 1 healthy, 0 not (yet); only for a workload with health checks. */
  readonly healthy?: 0 | 1;
}

export interface MetricsFigures {
  readonly agentName: string;
  readonly workloads: ReadonlyMap<string, WorkloadFigures>;
  readonly online: boolean;
  /** When the current connection came up (ms), and the protocol line it speaks. */
  readonly since?: number;
  readonly line: string;
  readonly connections: number;
  /** Control Interface requests by workload, then decision. */
  readonly requests: ReadonlyMap<string, { readonly allowed: number; readonly denied: number }>;
  readonly log: { readonly entries: number; readonly bytes: number; readonly cut: number };
  readonly eventsRestarts: number;
  /** By engine: the images the agent removed, and how full the image store's filesystem was when last looked at. */
  readonly images: ReadonlyMap<string, { readonly removed: number; readonly usedRatio?: number }>;
}

export const noFigures = (agentName: string): MetricsFigures => ({
  agentName,
  workloads: new Map(),
  online: false,
  line: '',
  connections: 0,
  requests: new Map(),
  log: { entries: 0, bytes: 0, cut: 0 },
  eventsRestarts: 0,
  images: new Map(),
});

/** A workload Removed for this long is gone (a restart's Removed is followed by its new start at once): its series go. */
export const FORGET_REMOVED_MS = 10_000;

/** The figures after an event that came at `now` (ms). CLI calls are the histogram's alone: they change no figure. */
export function stepFigures(figures: MetricsFigures, event: MetricsEvent, now: number): MetricsFigures {
  switch (event.kind) {
    case 'connection':
      if (!event.online) return { ...figures, online: false };
      return { ...figures, online: true, since: now, line: event.line ?? '', connections: figures.connections + 1 };
    case 'states':
      return { ...figures, workloads: withStates(figures, event.states, now) };
    case 'authorized': {
      const requests = new Map(figures.requests);
      const before = requests.get(event.workloadName) ?? { allowed: 0, denied: 0 };
      requests.set(event.workloadName, event.allowed ? { ...before, allowed: before.allowed + 1 } : { ...before, denied: before.denied + 1 });
      return { ...figures, requests };
    }
    case 'logEntries': {
      const { entries, bytes, cut } = figures.log;
      return { ...figures, log: { entries: entries + event.count, bytes: bytes + event.bytes, cut: cut + event.cut } };
    }
    case 'eventsRestarted':
      return event.engine === 'Podman' ? { ...figures, eventsRestarts: figures.eventsRestarts + 1 } : figures;
    case 'images': {
      const images = new Map(figures.images);
      const before = images.get(event.engine) ?? { removed: 0 };
      images.set(event.engine, { removed: before.removed + (event.removed ?? 0), usedRatio: event.usedRatio ?? before.usedRatio });
      return { ...figures, images };
    }
    case 'cliCall':
      return figures;
  }
}

function withStates(figures: MetricsFigures, states: readonly WorkloadState[], now: number): Map<string, WorkloadFigures> {
  const workloads = new Map(figures.workloads);
  for (const { instanceName, executionState: s } of states) {
    if (instanceName.agentName !== figures.agentName) continue;
    const before = workloads.get(instanceName.workloadName);
    const starts = s.state === 'Pending' && s.substate === 'Starting';
    const ended = !starts && (s.state === 'Succeeded' || s.state === 'Failed' || (s.state !== 'Running' && (before?.ended ?? false)));
    workloads.set(instanceName.workloadName, {
      state: s,
      at: now,
      ended,
      restarts: (before?.restarts ?? 0) + (starts && before?.ended ? 1 : 0),
      exitCode: s.exitCode ?? before?.exitCode,
      healthy: healthOf(s, before),
    });
  }
  return workloads;
}

/** A workload without a check is Running(Ok) too: healthy only after its check was awaited. */
function healthOf(s: ExecutionState, before: WorkloadFigures | undefined): 0 | 1 | undefined {
  if (s.health === 'starting' || s.health === 'unhealthy') return 0;
  if (s.health === 'healthy' && before?.state.health === 'starting') return 1;
  return before?.healthy;
}

/** The figures without the workloads Removed FORGET_REMOVED_MS ago or more (the same object when there are none). */
export function forgetRemoved(figures: MetricsFigures, now: number): MetricsFigures {
  const gone = [...figures.workloads].filter(([, w]) => w.state.state === 'Removed' && now - w.at >= FORGET_REMOVED_MS).map(([name]) => name);
  if (gone.length === 0) return figures;
  const workloads = new Map(figures.workloads);
  for (const name of gone) workloads.delete(name);
  return { ...figures, workloads };
}

/** One container's figures from a runtime's stats, with the workload of this agent it belongs to (its runtime tells). */
export interface WorkloadContainerFigures extends ContainerFigures {
  readonly workload: string;
}

export type Figures = Omit<ContainerFigures, 'Name'>;

/**
 * The containers' figures by workload, summed (a podman-kube workload has several): the memory limit is the
 * largest of theirs, and the network the pod's own (its containers share it, so each shows all of it).
 */
export function byWorkload(all: readonly WorkloadContainerFigures[]): Map<string, Figures> {
  const figures = new Map<string, Figures>();
  for (const { workload, Name, ...c } of all) {
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
