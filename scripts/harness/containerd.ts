// The containerd the set-up started (scripts/setup-containerd.sh), stopped and started again by the specs:
// that one only, never another containerd on the machine (a user's, another test's), or through systemd.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';

const systemd = () => {
  try {
    return readdirSync('/run/systemd/system') !== undefined;
  } catch {
    return false;
  }
};

/** The pid of the containerd serving the default address: started with no options of its own. */
function defaultContainerd(): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
      if (argv.length === 1 && argv[0].split('/').at(-1) === 'containerd') return Number(name);
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}

const wait = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Stops it; its containers run on (their shims outlive it). */
export function stopContainerd(): void {
  if (systemd()) {
    execFileSync('systemctl', ['stop', 'containerd']);
    return;
  }
  const pid = defaultContainerd();
  if (pid === undefined) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 50 && defaultContainerd() === pid; i++) wait(100);
}

/** Starts it as the set-up does, and waits until it answers. */
export function startContainerd(): void {
  execFileSync('sh', [
    '-c',
    `if [ -d /run/systemd/system ]; then systemctl start containerd; else setsid nohup containerd >>/var/log/containerd.log 2>&1 </dev/null & fi; for i in $(seq 1 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done`,
  ]);
}

/** A containerd of a spec's own (its root, state and socket in a temporary folder), with the local busybox image in `namespaces`. */
export class PrivateContainerd {
  readonly socket: string;
  private readonly child: ChildProcess;

  constructor(
    private readonly dir: string,
    private readonly namespaces: readonly string[],
    image: string,
  ) {
    this.socket = `${dir}/c.sock`;
    writeFileSync(
      `${dir}/config.toml`,
      `version = 2\nroot = "${dir}/root"\nstate = "${dir}/state"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "${this.socket}"\n`,
    );
    this.child = spawn('containerd', ['--config', `${dir}/config.toml`], { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      try {
        execFileSync('ctr', ['--address', this.socket, 'version'], { stdio: 'ignore' });
        break;
      } catch {
        wait(100);
      }
    }
    execFileSync('podman', ['save', '--quiet', image, '-o', `${dir}/image.tar`]);
    for (const ns of namespaces)
      execFileSync('ctr', ['--address', this.socket, '--namespace', ns, 'images', 'import', `${dir}/image.tar`], { stdio: 'ignore' });
  }

  /** Its containers removed, it stopped, its folder gone. */
  end(): void {
    for (const ns of this.namespaces)
      execFileSync(
        'sh',
        ['-c', `ids=$(nerdctl --address ${this.socket} -n ${ns} ps -aq); [ -z "$ids" ] || nerdctl --address ${this.socket} -n ${ns} rm -f $ids`],
        {
          stdio: 'ignore',
        },
      );
    this.child.kill('SIGTERM');
    for (let i = 0; i < 50 && this.child.exitCode === null && this.child.signalCode === null; i++) wait(100);
    execFileSync('sh', ['-c', `grep -o " ${this.dir}[^ ]*" /proc/mounts | xargs -r -n1 umount -l; rm -rf ${this.dir}`], { stdio: 'ignore' });
  }
}
