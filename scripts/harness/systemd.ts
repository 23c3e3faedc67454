// Real systemd for the specs: these machines do not run systemd as their first process, so Podman runs it as a
// container's (the image scripts/setup-systemd.sh makes), and the agent reaches it through small `systemctl`,
// `journalctl` and `systemd-stdio-bridge` wrappers that run the real ones in that container's namespaces
// (`nsenter`: a process of its own there, as on a node; `podman exec` sessions, which the agent's SIGKILLs of
// streams left behind, made later execs into the container wait).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cli } from '../../lib/runtimes/base/cli.js';
import { until } from './wait.js';

export const SYSTEMD_IMAGE = 'localhost/systemd:bookworm';
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

/** A systemd in a container of its own, and the wrappers that reach it. */
export class SystemdHost {
  /** The folder of the wrappers: first on an agent's PATH, the agent's systemctl is this systemd's. */
  readonly bin: string;

  private constructor(
    readonly container: string,
    /** The container's first process: its namespaces are systemd's. */
    private readonly pid: string,
  ) {
    this.bin = mkdtempSync(path.join(os.tmpdir(), 'ank-systemd-bin-'));
    for (const tool of SYSTEMD_TOOLS) {
      const wrapper = path.join(this.bin, tool);
      writeFileSync(wrapper, `#!/bin/sh\necho ${tool} >> ${this.callLog}\nexec nsenter -t ${pid} -a ${tool} "$@"\n`);
      chmodSync(wrapper, 0o755);
    }
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

  /** The wrappers as the runtime's CLIs, by binary name. */
  clis(): Record<string, Cli> {
    return Object.fromEntries(SYSTEMD_TOOLS.map((tool) => [tool, new Cli({ binary: path.join(this.bin, tool) })]));
  }

  /** Runs a command in the container's namespaces; its output. */
  exec(...args: string[]): string {
    return execFileSync('nsenter', ['-t', this.pid, '-a', ...args], { encoding: 'utf8', timeout: 30_000, stdio: 'pipe' }).trim();
  }

  /** Installs a unit (`[Service]` lines given), and has systemd read it. */
  install(unit: string, service: string): void {
    this.exec('sh', '-c', `printf '%s\\n' "$1" > /etc/systemd/system/${unit} && systemctl daemon-reload`, 'sh', `[Service]\n${service}`);
  }

  /** What systemctl show says of one property of the unit. */
  property(unit: string, name: string): string {
    return this.exec('systemctl', 'show', `--property=${name}`, '--value', unit);
  }

  stop(): void {
    execFileSync('podman', ['rm', '--force', '--time=0', this.container], { stdio: 'ignore' });
    rmSync(this.bin, { recursive: true, force: true });
  }

  private quiet(...args: string[]): string {
    try {
      return this.exec(...args);
    } catch (err) {
      return String((err as { stdout?: string }).stdout ?? '').trim();
    }
  }
}
