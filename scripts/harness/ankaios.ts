// The released Ankaios as a user has it: `ank-server`, `ank` and `ank-agent` from $ANKAIOS_BIN, all on
// loopback. A cluster is one server, our agent and (where a case needs it) the released agent beside it,
// driven through the `ank` CLI only, as a user would drive them.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { BIN } from './agent.js';
import { cleanup, uniqueAgent } from './podman.js';
import { specFolder } from './temp.js';

const run = promisify(execFile);
export const ANKAIOS_BIN = process.env.ANKAIOS_BIN ?? '';
const bin = (name: string) => path.join(ANKAIOS_BIN, name);

/** The TLS material of a cluster: a CA, the server's certificate, one for each agent and one for the CLI. */
export interface Pems {
  readonly folder: string;
}

export interface WorkloadStateRow {
  readonly agent: string;
  readonly workload: string;
  readonly id: string;
  readonly state: string;
  readonly subState: string;
  readonly additionalInfo: string;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A process of the cluster, with what it wrote kept for the test's failure message. */
export class Proc {
  output = '';
  readonly exited: Promise<number | null>;
  constructor(readonly child: ChildProcess) {
    child.stdout?.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}

export class Cluster {
  readonly folder = specFolder('ank-released-');
  /** Our agent's name and the released agent's name; unique, so their containers are told apart. */
  readonly ours = uniqueAgent('ours');
  readonly theirs = uniqueAgent('theirs');
  server?: Proc;
  ourAgent?: Proc;
  theirAgent?: Proc;
  private port = 0;
  private tls = false;

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  private get securityArgs(): string[] {
    return this.tls ? [] : ['-k'];
  }

  private pemArgs(who: 'server' | 'agent' | 'cli'): string[] {
    if (!this.tls) return [];
    const dir = path.join(this.folder, 'pems');
    return ['--ca_pem', path.join(dir, 'ca.pem'), '--crt_pem', path.join(dir, `${who}.pem`), '--key_pem', path.join(dir, `${who}-key.pem`)];
  }

  /** Starts the released server; with `manifest`, as its start-up manifest; with `tls`, with mTLS certificates made here. */
  async startServer(options: { manifest?: string; tls?: boolean } = {}): Promise<void> {
    if (this.port === 0) this.port = await freePort();
    if (options.tls !== undefined) this.tls = options.tls;
    if (this.tls) await run('bash', ['scripts/make-test-certs.sh', path.join(this.folder, 'pems'), this.ours]);
    const manifest = options.manifest === undefined ? [] : ['-m', this.file('startup.yaml', options.manifest)];
    this.server = new Proc(
      spawn(bin('ank-server'), [...this.securityArgs, ...this.pemArgs('server'), '-a', `127.0.0.1:${this.port}`, ...manifest], {
        env: { ...process.env, RUST_LOG: 'info' },
      }),
    );
    await this.until(async () => (await this.ank('get', 'agents').catch(() => '')).startsWith('NAME'), 'the server to answer');
  }

  /** Starts our agent against the server (its run folder stays for restarts); `pathFirst`: a folder its PATH looks in first. */
  startOurs(pathFirst?: string): Proc {
    const debug = process.env.ANKAIOS_DEBUG ? ['--debug'] : [];
    const env = pathFirst ? { ...process.env, PATH: `${pathFirst}:${process.env.PATH}` } : process.env;
    this.ourAgent = new Proc(
      spawn(process.execPath, [BIN, '-n', this.ours, '-s', this.url, ...this.securityArgs, ...this.pemArgs('agent'), '-r', this.runFolder('ours'), ...debug], {
        env,
      }),
    );
    return this.ourAgent;
  }

  /** Starts the released agent beside ours (under `name`: the released agent's own unless given). */
  startTheirs(name = this.theirs): Proc {
    this.theirAgent = new Proc(
      spawn(bin('ank-agent'), ['-n', name, '-s', this.url, ...this.securityArgs, '-r', this.runFolder('theirs')], {
        env: { ...process.env, RUST_LOG: 'info' },
      }),
    );
    return this.theirAgent;
  }

  runFolder(which: 'ours' | 'theirs'): string {
    const folder = path.join(this.folder, `run-${which}`);
    mkdirSync(folder, { recursive: true });
    return folder;
  }

  /** Runs the `ank` CLI against the server; resolves with what it printed, rejects when it fails. */
  async ank(...args: string[]): Promise<string> {
    const { stdout } = await run(bin('ank'), [...this.securityArgs, ...this.pemArgs('cli'), '-s', this.url, ...args], { timeout: 30_000 });
    return stdout;
  }

  /** Starts an `ank` command that goes on (`logs -f`); what it prints is collected. */
  follow(...args: string[]): Proc {
    return new Proc(spawn(bin('ank'), [...this.securityArgs, ...this.pemArgs('cli'), '-s', this.url, ...args]));
  }

  /** `ank apply` of a manifest written from `text`, without waiting for the workloads. */
  async apply(text: string): Promise<void> {
    await this.ank('--no-wait', 'apply', this.file(`manifest-${Date.now()}.yaml`, text));
  }

  /** The workload states the server holds, from `ank get state -o json`. */
  async states(): Promise<WorkloadStateRow[]> {
    const json = JSON.parse(await this.ank('get', 'state', '-o', 'json', 'workloadStates')) as {
      workloadStates?: Record<string, Record<string, Record<string, { state: string; subState: string; additionalInfo: string }>>>;
    };
    return Object.entries(json.workloadStates ?? {}).flatMap(([agent, workloads]) =>
      Object.entries(workloads).flatMap(([workload, ids]) =>
        Object.entries(ids).map(([id, s]) => ({ agent, workload, id, state: s.state, subState: s.subState, additionalInfo: s.additionalInfo })),
      ),
    );
  }

  /** `State(SubState)` of a workload at the server, or undefined while it has none. */
  async stateOf(workload: string): Promise<string | undefined> {
    const row = (await this.states()).find((s) => s.workload === workload);
    return row && `${row.state}(${row.subState})`;
  }

  /** The names of the agents the server lists as connected. */
  async agents(): Promise<string[]> {
    const json = JSON.parse(await this.ank('get', 'state', '-o', 'json', 'agents')) as { agents?: Record<string, unknown> };
    return Object.keys(json.agents ?? {}).sort();
  }

  /** Waits until `condition` holds, polling every 200 ms. */
  async until(condition: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!(await condition().catch(() => false))) {
      if (Date.now() > end) {
        // ANKAIOS_TAIL: how much of each output to show (3000 characters unless given).
        const tail = -(Number(process.env.ANKAIOS_TAIL) || 3000);
        throw new Error(
          `timed out waiting for ${what}\n--- server ---\n${this.server?.output.slice(tail) ?? ''}\n--- our agent ---\n${this.ourAgent?.output.slice(tail) ?? ''}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Waits until the workload shows `state` (`Running(Ok)`, …) at the server. */
  async waitFor(workload: string, state: string, timeoutMs = 60_000): Promise<void> {
    await this.until(
      async () => (await this.stateOf(workload)) === state,
      `${workload} to be ${state} (last: ${await this.stateOf(workload).catch(() => '?')})`,
      timeoutMs,
    );
  }

  file(name: string, text: string): string {
    const file = path.join(this.folder, name);
    writeFileSync(file, text);
    return file;
  }

  /** Stops everything; what each process said stays in the cluster's folder (server.log, ours.log, theirs.log). */
  async stopAll(): Promise<void> {
    await Promise.all([this.ourAgent?.stop('SIGKILL'), this.theirAgent?.stop('SIGKILL'), this.server?.stop('SIGKILL')]);
    for (const [name, proc] of [
      ['server', this.server],
      ['ours', this.ourAgent],
      ['theirs', this.theirAgent],
    ] as const) {
      if (proc) writeFileSync(path.join(this.folder, `${name}.log`), proc.output);
    }
    cleanup(this.ours);
    cleanup(this.theirs);
  }
}

/** A podman workload of the local busybox image on `agent`, as manifest YAML lines. */
export function workloadYaml(name: string, agent: string, script: string, extra = '', runtime = 'podman'): string {
  return `  ${name}:
    runtime: ${runtime}
    agent: ${agent}
${extra}    runtimeConfig: |
      image: localhost/busybox:latest
      commandOptions: ["--stop-timeout", "1"]
      commandArgs: ["/bin/sh", "-c", ${JSON.stringify(script)}]
`;
}

export const manifest = (...workloads: string[]) => `apiVersion: v1\nworkloads:\n${workloads.join('')}`;
