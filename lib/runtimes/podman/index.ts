// The Podman module: the `podman` and `podman-kube` runtimes on one Podman CLI, one container cache (kept by
// `podman events` and conmon's exit files) and one image storage's pulls.
import { existsSync } from 'node:fs';
import { downloadFoldersOf, removeDownloadFolders } from '../../drivers/machine.js';
import { Subject } from 'rxjs';
import type { ContainerEvent } from '../../ports.js';
import type { RuntimeConnector } from '../../runtime-connector.js';
import { ImagePulls } from '../containers/image-pulls.js';
import { containerWatch } from '../containers/watch.js';
import type { RuntimeModule } from '../base/module.js';
import { conmonExits, containerEvents } from './events.js';
import { PodmanKubeRuntime, runsInPod } from './kube.js';
import { PodmanRuntime } from './runtime.js';
import { PodmanService } from './service.js';
import { PodmanCli } from './podman-cli.js';
import { podmanFigures } from './stats.js';
import { imageCollector } from '../containers/image-gc.js';
import { podmanImageEngine } from './images.js';
import { type PodmanSettings, podmanSettings } from './settings.js';

/**
 * swdd~agent-supports-multiple-runtime-connectors~1. `podmanTimers`: whether Podman runs its own health-check
 * timers (a podman-kube container's livenessProbe then runs by Podman, which the agent cannot turn off); the
 * host tells unless given. `systemSocket`: where the system's Podman service listens (SYSTEM_SOCKET unless given).
 */
/** What a Podman call killed amid a pull leaves: its partial downloads, which Podman removes only when a pull ends by itself. */
export const PARTIAL_DOWNLOADS = { of: downloadFoldersOf, remove: removeDownloadFolders };

export function podmanModule({
  podmanTimers,
  systemSocket,
  service: shared,
}: {
  readonly podmanTimers?: boolean;
  readonly systemSocket?: string;
  /** A service the agent shares with others (the specs' agents): its own is then never started. */
  readonly service?: PodmanService;
} = {}): RuntimeModule<PodmanSettings> {
  return {
    names: ['podman', 'podman-kube'],
    settings: podmanSettings,
    make(context, own) {
      const { cli: cliOf, config, log, trace } = context;
      // Agent config `podman_service`: false asks Podman by a process of its own for every call.
      const podman = cliOf('podman', { leftovers: PARTIAL_DOWNLOADS });
      // The run's own service is the run's to stop; a shared one (the specs') is not.
      const made =
        !shared && own.service
          ? new PodmanService({ cli: podman, folder: config.folder, systemSocket, log, note: (text) => trace.note('podman', text) })
          : undefined;
      if (made) context.held.add(() => made.dispose());
      const service = shared ?? made;
      const cli = new PodmanCli(podman, service);
      context.held.add(() => cli.dispose());
      // Started now, so that it answers by the time the agent asks for its workloads.
      service?.warm();
      // A `podman start` the agent ran comes before Podman's stream tells it (with a late died event of the run
      // before in between): the cache hears it from the agent at once.
      const ownStarts$ = new Subject<ContainerEvent>();
      const watchState = containerWatch(context, {
        engine: { name: 'Podman', stage: 'podman.cache' },
        list: () => cli.containers(),
        events$: containerEvents(cli),
        early$: conmonExits(context.scheduler),
        own$: ownStarts$,
      });
      const startedInPlace = (id: string, askedAt: number) => ownStarts$.next({ id, change: 'started', at: askedAt, own: true });
      // The images the agent pulls are recorded in its folder and collected when no container uses them.
      const gc = imageCollector(context, podmanImageEngine(cli));
      const pulls = new ImagePulls(cli, { gc, maxCreates: own.maxCreates });
      const health = { on: config.health, podmanTimers: podmanTimers ?? systemdRuns() };
      return {
        connectors: new Map<string, RuntimeConnector>([
          ['podman', new PodmanRuntime(cli, watchState, config.health, startedInPlace, pulls)],
          ['podman-kube', new PodmanKubeRuntime(cli, watchState, log, health, pulls)],
        ]),
        figures: (agentName, running) => podmanFigures(cli, agentName, (pod) => running.findWhere((r) => runsInPod(r, pod))?.workloadName),
      };
    },
  };
}

/** Whether the host runs systemd (as sd_booted() tells it), and so Podman's health-check timers. */
export const systemdRuns = (): boolean => existsSync('/run/systemd/system');
