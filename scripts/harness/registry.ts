// A real image registry for specs and the bench: Debian's docker-registry (scripts/setup-registry.sh) on a
// loopback port, its store in a temporary folder; it can be stopped and started again on the same port.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { podman } from './podman.js';
import { until } from './wait.js';
import { specFolder } from './temp.js';

export const hasRegistry = () => spawnSync('sh', ['-c', 'command -v docker-registry']).status === 0;

/** A registry of our own: started, stopped and started again on the same port and store. */
export class Registry {
  readonly folder = specFolder('ank-registry-');
  port = 0;
  private process?: ChildProcess;

  private get running(): boolean {
    return this.process !== undefined && this.process.exitCode === null && this.process.signalCode === null;
  }

  async start(): Promise<void> {
    if (this.running) return;
    if (this.port === 0) this.port = await freePort();
    const config = path.join(this.folder, 'config.yml');
    writeFileSync(
      config,
      `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${this.folder}/store\nhttp:\n  addr: 127.0.0.1:${this.port}\n`,
    );
    this.process = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
    await until(async () => (await fetch(`http://127.0.0.1:${this.port}/v2/`).catch(() => undefined))?.ok === true, 'the registry to answer');
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.process?.once('exit', resolve));
    this.process?.kill('SIGKILL');
    await exited;
  }

  /** Pushes a local image as `name` and removes the local copy, so that a workload has to pull it. */
  push(local: string, name: string): string {
    const remote = `127.0.0.1:${this.port}/${name}`;
    podman('push', '--quiet', '--tls-verify=false', local, remote);
    spawnSync('podman', ['rmi', '--force', remote], { stdio: 'ignore' });
    return remote;
  }

  remove(): void {
    rmSync(this.folder, { recursive: true, force: true });
  }

  /** A local image with a layer of `mib` MiB of random bytes, pushed as `name` (and not kept locally). */
  pushBig(name: string, mib: number, base: string): string {
    const maker = `ank-big-${process.pid}-${name.replace(/[^a-z0-9]/g, '-')}`;
    const local = `localhost/${maker}:latest`;
    podman('run', '--name', maker, base, 'sh', '-c', `head -c ${mib * 1048576} /dev/urandom > /blob`);
    podman('commit', '--quiet', maker, local);
    podman('rm', maker);
    const remote = this.push(local, name);
    spawnSync('podman', ['rmi', '--force', local], { stdio: 'ignore' });
    return remote;
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A TCP proxy on loopback in front of a registry that sends its answers slowly (`bytesPerSecond`), or stops
 * sending them after `stallAfter` bytes of a connection (the connection stays open): a slow link, a stalled registry.
 */
export class SlowProxy {
  port = 0;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly target: number,
    private readonly o: { bytesPerSecond?: number; stallAfter?: number } = {},
  ) {
    this.server = net.createServer((client) => this.connect(client));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  private connect(client: net.Socket): void {
    const upstream = net.connect(this.target, '127.0.0.1');
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    let sent = 0;
    upstream.on('data', (chunk: Buffer) => {
      const { bytesPerSecond, stallAfter } = this.o;
      if (stallAfter !== undefined && sent + chunk.length > stallAfter) {
        if (sent < stallAfter) client.write(chunk.subarray(0, stallAfter - sent));
        sent = stallAfter;
        upstream.pause();
        return;
      }
      sent += chunk.length;
      client.write(chunk);
      if (bytesPerSecond !== undefined) {
        upstream.pause();
        setTimeout(() => upstream.resume(), (chunk.length / bytesPerSecond) * 1000);
      }
    });
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
