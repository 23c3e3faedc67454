// Helpers for the specs that run real Podman.
import type { CrashLoopBackoff } from '../../lib/restart-policy.js';
import { RunningWorkloads } from '../../lib/running-workloads.js';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { EMPTY, Subject, type Subscription, of, asyncScheduler } from 'rxjs';
import { formatState } from '../../lib/execution-state.js';
import { silentLogger } from '../../lib/logger.js';
import type { FromServer, WorkloadState } from '../../lib/messages.js';
import type { Cli, CliOptions } from '../../lib/runtimes/base/cli.js';
import { PodmanCli } from '../../lib/runtimes/podman/podman-cli.js';
import { systemdModule } from '../../lib/runtimes/systemd/index.js';
import { builtInRuntimes } from '../../bin/wiring.js';
import { containerdModule } from '../../lib/runtimes/containerd/index.js';
import { PARTIAL_DOWNLOADS, podmanModule } from '../../lib/runtimes/podman/index.js';
import { PodmanService } from '../../lib/runtimes/podman/service.js';
import { type ImageGcSettings, moduleSettingsOf, parseConfigFile } from '../../lib/config.js';
import { RUNTIME_SETTINGS } from '../../bin/settings.js';
import { hostSide } from '../../lib/drivers/host-side.js';
import { WorkloadFiles } from '../../lib/drivers/workload-files.js';
import { type RestartPolicy, type WorkloadSpec, instanceId, instanceKey, noAccess } from '../../lib/workload.js';
import { runWorkloads } from '../../streams/run-workloads.js';
import { harnessCli, harnessProcesses } from './processes.js';
import { specFolder } from './temp.js';

export const IMAGE = 'localhost/busybox:latest';

/** Fails with the way to install Podman when it is missing. */
export function requirePodman(): void {
  try {
    execFileSync('podman', ['image', 'exists', IMAGE]);
  } catch {
    throw new Error(`Podman or the image ${IMAGE} is missing: run 'bash scripts/setup-podman.sh' (as root) first.`);
  }
}

let shared: PodmanService | undefined;

/**
 * The Podman service the specs' agents share, as the agents of a node share it; none with
 * ANKAGENT_PODMAN_SERVICE=false (the agent config's `podman_service = false`: a Podman process for every call).
 */
export function specService(): PodmanService | undefined {
  if (process.env.ANKAGENT_PODMAN_SERVICE === 'false') return undefined;
  if (shared === undefined) {
    shared = new PodmanService({ cli: harnessCli('podman'), folder: specFolder('ank-spec-podman-'), log: silentLogger });
    // Stopped with the test process, as an agent's run stops its own: else it outlives the specs by its idle time.
    const service = shared;
    process.once('exit', () => service.dispose());
  }
  return shared;
}

/** The Podman CLI of a node's agent: through the specs' service where there is one. */
/** A Podman client on the harness's processes, through `service` where one is given (the specs' agents' shared one, specService()). */
export const harnessPodman = (service?: PodmanService, options: Omit<CliOptions, 'binary' | 'processes' | 'clock'> = {}): PodmanCli =>
  new PodmanCli(harnessCli('podman', { leftovers: PARTIAL_DOWNLOADS, ...options }), service);

/** The runtime modules' settings of an agent config's TOML, as the agent reads them (its declarations, no environment). */
export const moduleSettings = (toml: string): ReadonlyMap<string, unknown> =>
  moduleSettingsOf(RUNTIME_SETTINGS, parseConfigFile(`version = 'v1'\n${toml}`, 'spec', undefined, RUNTIME_SETTINGS), {});

export const uniqueAgent = (prefix = 'spec') => `${prefix}_${randomBytes(4).toString('hex')}`;

export function podman(...args: string[]): string {
  return execFileSync('podman', args, { encoding: 'utf8' }).trim();
}

/**
 * Removes the agent's containers. One that conmon is still cleaning up after an exit (a restart in the
 * spec's last moment) can have its shm mount busy for a moment: Podman says so, and it is asked again.
 */
function removeContainers(agentName: string): void {
  for (let attempt = 1; ; attempt++) {
    const ids = podman('ps', '--all', '--quiet', `--filter=label=agent=${agentName}`).split('\n').filter(Boolean);
    if (!ids.length) return;
    try {
      podman('rm', '--force', '--time=0', ...ids);
      return;
    } catch (err) {
      if (attempt === 5 || !String(err).includes('device or resource busy')) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
}

/**
 * Removes what a spec that failed may have left of the agent's containers outside Podman's list: the containers of
 * conmons whose container name ends in the agent's name and whose id Podman does not list, by Podman's runtime.
 */
function removeUnlisted(agentName: string): void {
  const listed = new Set(podman('ps', '--all', '--external', '--no-trunc', '--format', '{{.ID}}').split('\n'));
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readlinkSync(`/proc/${pid}/exe`) !== '/usr/bin/conmon') continue;
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
      const id = argv[argv.indexOf('-c') + 1];
      if (argv[argv.indexOf('-n') + 1]?.endsWith(`.${agentName}`) && /^[0-9a-f]{64}$/.test(id) && !listed.has(id))
        spawnSync('runc', ['delete', '--force', id], { stdio: 'ignore' });
    } catch {
      // Gone meanwhile.
    }
  }
}

/** The Podman services running on a socket in `folder` (an agent's own, started for its run), by pid. */
export function podmanServicesIn(folder: string): string[] {
  try {
    return execFileSync('pgrep', ['-f', `podman system service .*unix://${folder}/`], { encoding: 'utf8' })
      .trim()
      .split('\n');
  } catch {
    // pgrep found none.
    return [];
  }
}

/** Removes every container, pod and volume of the agent, and its containerd containers where nerdctl is. */
export function cleanup(agentName: string): void {
  removeContainers(agentName);
  removeUnlisted(agentName);
  spawnSync(
    'sh',
    ['-c', `command -v nerdctl >/dev/null || exit 0; ids=$(nerdctl ps -aq --filter label=agent=${agentName}); [ -z "$ids" ] || nerdctl rm -f $ids`],
    {
      stdio: 'ignore',
    },
  );
  // Pods are named by their Kubernetes manifests; the specs name them after the agent, with '-' for '_'.
  const pods = [agentName, agentName.replace(/_/g, '-')].flatMap((name) => podman('pod', 'ps', '--quiet', `--filter=name=${name}`).split('\n')).filter(Boolean);
  if (pods.length) podman('pod', 'rm', '--force', ...new Set(pods));
  const volumes = podman('volume', 'ls', '--quiet')
    .split('\n')
    .filter((v) => v.includes(`.${agentName}.`));
  if (volumes.length) podman('volume', 'rm', '--force', ...volumes);
}

export interface BusyboxOptions {
  script?: string;
  files?: WorkloadSpec['files'];
  restartPolicy?: RestartPolicy;
  dependencies?: WorkloadSpec['dependencies'];
  extra?: string;
}

/** A script that sleeps and ends at once on SIGTERM (a shell as PID 1 ignores it: a pod's removal would wait 10 s). */
export const SLEEP_UNTIL_STOPPED = "trap 'exit 0' TERM; sleep 3600 & wait";

/** A container of a pod: its name, the shell script it runs (by default it sleeps until stopped), further keys (probes) as YAML indented by four spaces. */
export interface PodContainer {
  readonly name: string;
  readonly script?: string;
  readonly more?: string;
  /** The local busybox image unless given. */
  readonly image?: string;
}

/** A podman-kube workload: one pod named `podName` of containers (of the local busybox image unless told); `o.extra`: more of its runtime config. */
export function kubePod(name: string, agentName: string, podName: string, containers: readonly PodContainer[], o: BusyboxOptions = {}): WorkloadSpec {
  const listed = containers.map(
    (c) =>
      `  - name: ${c.name}\n    image: ${c.image ?? IMAGE}\n    command: ["/bin/sh", "-c", ${JSON.stringify(c.script ?? SLEEP_UNTIL_STOPPED)}]\n${c.more ?? ''}`,
  );
  const manifest = `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${podName}\nspec:\n  restartPolicy: Never\n  containers:\n${listed.join('')}`;
  return spec(name, agentName, 'podman-kube', `manifest: |\n${manifest.replace(/^/gm, '  ')}${o.extra ? `\n${o.extra}` : ''}`, o);
}

/** A podman workload running `sh -c <script>` in the local busybox image. */
export function busybox(name: string, agentName: string, o: BusyboxOptions = {}): WorkloadSpec {
  const runtimeConfig = `image: ${IMAGE}\ncommandOptions: ["--stop-timeout", "1"]\ncommandArgs: ["/bin/sh", "-c", ${JSON.stringify(o.script ?? 'sleep 3600')}]\n${o.extra ?? ''}`;
  return spec(name, agentName, 'podman', runtimeConfig, o);
}

export function spec(name: string, agentName: string, runtime: string, runtimeConfig: string, o: BusyboxOptions = {}): WorkloadSpec {
  return {
    instanceName: { workloadName: name, agentName, id: instanceId(runtimeConfig) },
    runtime,
    runtimeConfig,
    restartPolicy: o.restartPolicy ?? 'Never',
    dependencies: o.dependencies ?? {},
    tags: {},
    controlInterfaceAccess: noAccess,
    files: o.files ?? [],
  };
}

export const containerOf = (w: WorkloadSpec): string => podman('ps', '--all', '--format={{.ID}}', `--filter=name=^${instanceKey(w.instanceName)}$`);

/** The workload core on real Podman, fed by `send`, collecting every state it reports. */
export class PodmanAgent {
  readonly states: WorkloadState[] = [];
  /** The workloads its control loops run (what log requests are resolved against). */
  readonly running = new RunningWorkloads();
  private readonly input = new Subject<FromServer>();
  private readonly subscription: Subscription;
  private waiters: Array<() => void> = [];

  /** The CLI its Podman runs (its calls counted). */
  readonly cli: Cli;

  /**
   * With `ioFolder`, workload files are written there and mounted; `cli` runs podman (a real one unless given),
   * through the specs' service unless a CLI is given (then through `cache.service` where given).
   */
  constructor(
    readonly agentName: string,
    ioFolder?: string,
    cli?: Cli,
    /** The container caches' and health checks' options, the crash-loop back-off (kubelet's unless given), the nerdctl CLI. */
    cache: {
      verifyMs?: number;
      events?: boolean;
      health?: boolean;
      podmanTimers?: boolean;
      backoff?: CrashLoopBackoff;
      nerdctl?: Cli;
      pullAhead?: boolean;
      /** The runtime modules' part of an agent config, as TOML (`containerd = { address = … }`). */
      config?: string;
      /** The images the agent pulled are recorded in `folder` and collected so. */
      imageGc?: ImageGcSettings;
      folder?: string;
      /** More CLIs by binary name (the systemd specs' wrappers). */
      clis?: Readonly<Record<string, Cli>>;
      /** The Podman service its calls go through (with a CLI given; else the specs' one). */
      service?: PodmanService;
    } = {},
  ) {
    this.cli = cli ?? harnessCli('podman', { leftovers: PARTIAL_DOWNLOADS });
    const service = cli ? cache.service : specService();
    const host = ioFolder ? hostSide(ioFolder, new WorkloadFiles(ioFolder)) : undefined;
    this.subscription = runWorkloads(this.input, {
      agentName,
      backoff: cache.backoff,
      running: this.running,
      pullAhead: cache.pullAhead,
      scheduler: asyncScheduler,
      runtimes: builtInRuntimes(silentLogger, {
        processes: harnessProcesses(),
        ...cache,
        // The podman CLI is given, and the service it goes through (the specs' one): no service of the agent's own beside it.
        settings: moduleSettings(`${cache.config ?? ''}\npodman_service = false`),
        clis: { podman: this.cli, ...(cache.nerdctl && { nerdctl: cache.nerdctl }), ...cache.clis },
        modules: [podmanModule({ podmanTimers: cache.podmanTimers, service }), containerdModule, systemdModule],
      }),
      prepare: (spec) => host?.prepare(spec) ?? of({}),
      release: (spec) => host?.release(spec) ?? EMPTY,
      discard: (spec) => host?.discard?.(spec) ?? EMPTY,
    }).subscribe((states) => {
      this.states.push(...states);
      this.waiters.forEach((w) => w());
    });
  }

  send(message: FromServer): void {
    this.input.next(message);
  }

  /** `Pending(Starting): info` texts of a workload, in order. */
  history(workloadName: string): string[] {
    return this.states.filter((s) => s.instanceName.workloadName === workloadName).map((s) => formatState(s.executionState));
  }

  /** Resolves when the workload has reported a state whose text matches. */
  waitFor(workloadName: string, pattern: RegExp, timeoutMs = 20_000): Promise<void> {
    const seen = () => this.history(workloadName).some((h) => pattern.test(h));
    if (seen()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`${workloadName} never reported ${pattern}; it reported: ${this.history(workloadName).join(' → ')}`));
      }, timeoutMs);
      const check = () => {
        if (!seen()) return;
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
        resolve();
      };
      this.waiters.push(check);
    });
  }

  /** The agent ends; its workloads keep running (as when the agent process ends). */
  end(): void {
    this.subscription.unsubscribe();
  }

  /** The agent ends and its workloads are removed. */
  stop(): void {
    this.end();
    cleanup(this.agentName);
  }
}
