// Real systemd for the specs: these machines do not run systemd as their first process, so Podman runs it as a
// container's (the image scripts/setup-systemd.sh makes), and the agent reaches it through small `systemctl`,
// `journalctl` and `systemd-stdio-bridge` wrappers that run the real ones in that container's namespaces
// (`nsenter`: a process of its own there, as on a node; `podman exec` sessions, which the agent's SIGKILLs of
// streams left behind, made later execs into the container wait).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Cli, CliOptions } from '../../lib/runtimes/base/cli.js';
import { until } from './wait.js';
import { harnessCli } from './processes.js';
import { specFolder } from './temp.js';

export const SYSTEMD_IMAGE = 'localhost/systemd:bookworm';
/** Each process of the container: pid, where it waits in the kernel, command line (the image has no `ps`). */
const PROCESSES = `for p in /proc/[0-9]*; do echo "\${p#/proc/} $(cat $p/wchan 2>/dev/null) $(tr '\\0' ' ' < $p/cmdline 2>/dev/null)"; done`;
/** The binaries the systemd runtime runs. */
export const SYSTEMD_TOOLS = ['systemctl', 'journalctl', 'systemd-stdio-bridge'] as const;

/** Fails with the way to make the image when it is missing. */
export function requireSystemd(): void {
  try {
    execFileSync('podman', ['image', 'exists', SYSTEMD_IMAGE]);
  } catch {
    throw new Error(`The image ${SYSTEMD_IMAGE} is missing: run 'bash scripts/setup-systemd.sh' (as root) first.`);
  }
}

/**
 * A systemd in a container of its own, and the wrappers that reach it. Its units should be one process each (a
 * shell's last command exec'd): on a host with cgroup v1, systemd in a container hears of no emptied cgroup, and a
 * stop job of a unit whose children outlived its main process waited for TimeoutStopSec, the container's
 * processes all gone (a node's systemd, PID 1 of the machine, hears of it).
 */
export class SystemdHost {
  /** The folder of the wrappers: first on an agent's PATH, the agent's systemctl is this systemd's. */
  readonly bin: string;

  private constructor(
    readonly container: string,
    /** The container's first process: its namespaces are systemd's. */
    private readonly pid: string,
  ) {
    this.bin = specFolder('ank-systemd-bin-');
    for (const tool of SYSTEMD_TOOLS) this.mend(tool);
  }

  /** `tool`'s wrapper runs the real one in systemd's namespaces again. */
  mend(tool: (typeof SYSTEMD_TOOLS)[number]): void {
    this.wrap(tool, `exec nsenter -t ${this.pid} -a ${tool} "$@"`);
  }

  /** `tool`'s wrapper fails at once (noted as a call all the same), as a tool that cannot reach systemd. */
  break(tool: (typeof SYSTEMD_TOOLS)[number]): void {
    this.wrap(tool, 'exit 1');
  }

  private wrap(tool: (typeof SYSTEMD_TOOLS)[number], body: string): void {
    const wrapper = path.join(this.bin, tool);
    writeFileSync(wrapper, `#!/bin/sh\necho ${tool} >> ${this.callLog}\n${body}\n`);
    chmodSync(wrapper, 0o755);
  }

  /** Where each wrapper notes that it ran. */
  private get callLog(): string {
    return path.join(this.bin, 'calls.log');
  }

  /** How many times the agents ran `tool` so far. */
  calls(tool: (typeof SYSTEMD_TOOLS)[number]): number {
    try {
      return readFileSync(this.callLog, 'utf8')
        .split('\n')
        .filter((line) => line === tool).length;
    } catch {
      return 0;
    }
  }

  /** A folder of the wrappers but `tool`: an agent with it first on its PATH does not find `tool`. */
  binWithout(tool: (typeof SYSTEMD_TOOLS)[number]): string {
    const folder = path.join(this.bin, `without-${tool}`);
    mkdirSync(folder, { recursive: true });
    for (const other of SYSTEMD_TOOLS)
      if (other !== tool && !existsSync(path.join(folder, other))) symlinkSync(path.join(this.bin, other), path.join(folder, other));
    return folder;
  }

  /** Starts the container and waits until its systemd has booted. */
  static async start(): Promise<SystemdHost> {
    const container = `ank-systemd-${randomBytes(4).toString('hex')}`;
    execFileSync('podman', ['run', '-d', '--name', container, '--systemd=always', SYSTEMD_IMAGE], { stdio: 'ignore' });
    const pid = execFileSync('podman', ['inspect', '--format', '{{.State.Pid}}', container], { encoding: 'utf8' }).trim();
    const host = new SystemdHost(container, pid);
    await until(() => /^(running|degraded)$/.test(host.quiet('systemctl', 'is-system-running')), `systemd in ${container} to boot`, 60_000);
    return host;
  }

  /** The wrappers as the runtime's CLIs, by binary name, each call told to `observe` where given. */
  clis(observe?: CliOptions['observe']): Record<string, Cli> {
    return Object.fromEntries(SYSTEMD_TOOLS.map((tool) => [tool, harnessCli(path.join(this.bin, tool), { observe })]));
  }

  /** Runs a command in the container's namespaces; its output. A command that does not end within 30 s fails
   * with what systemd was doing then (its jobs, the processes, the journal's end). */
  exec(...args: string[]): string {
    try {
      return this.run(args, 30_000);
    } catch (err) {
      if ((err as { code?: string }).code !== 'ETIMEDOUT') throw err;
      const look = (...what: string[]) => {
        try {
          return this.run(what, 5_000);
        } catch (e) {
          return `(${what.join(' ')}: ${(e as Error).message})`;
        }
      };
      throw new Error(
        `'${args.join(' ')}' did not end within 30 s in ${this.container}.\njobs:\n${look('systemctl', 'list-jobs', '--no-pager')}\n` +
          `processes:\n${look('sh', '-c', PROCESSES)}\njournal:\n${look('journalctl', '-n', '40', '--no-pager')}`,
      );
    }
  }

  /** Installs units (name → `[Service]` lines), and has systemd read them. */
  install(units: Record<string, string>): void {
    const files = Object.entries(units).map(([unit, service]) => [unit, `[Service]\n${service}`]);
    const writes = files.map((_, i) => `printf '%s\\n' "\${${2 * i + 2}}" > "/etc/systemd/system/\${${2 * i + 1}}"`).join(' && ');
    this.exec('sh', '-c', `${writes} && systemctl daemon-reload`, 'sh', ...files.flat());
  }

  /** What systemctl show says of one property of the unit. */
  property(unit: string, name: string): string {
    return this.exec('systemctl', 'show', `--property=${name}`, '--value', unit);
  }

  stop(): void {
    execFileSync('podman', ['rm', '--force', '--time=0', this.container], { stdio: 'ignore' });
    rmSync(this.bin, { recursive: true, force: true });
  }

  private run(args: string[], timeout: number): string {
    return execFileSync('nsenter', ['-t', this.pid, '-a', ...args], { encoding: 'utf8', timeout, stdio: 'pipe' }).trim();
  }

  private quiet(...args: string[]): string {
    try {
      return this.exec(...args);
    } catch (err) {
      return String((err as { stdout?: string }).stdout ?? '').trim();
    }
  }
}
