// The `systemd` runtime connector: a workload is a unit that is already installed, which the agent starts, stops
// or restarts as the workload asks (no unit file is written or removed); its state is the unit's, as systemd
// tells it (unit-watch.ts); its logs are the journal's. What the agent manages is kept in its io folder, so that
// an agent started again finds its units as it left them.
import path from 'node:path';
import { EMPTY, type Observable, catchError, concat, defer, distinctUntilChanged, filter, forkJoin, ignoreElements, map, mergeMap, of, throwError } from 'rxjs';
import { sameState } from '../../execution-state.js';
import type { ExecutionState } from '../../execution-state.js';
import type { LogsOptions } from '../../messages.js';
import type { CreateOptions, ExistingWorkload, RuntimeConnector } from '../../runtime-connector.js';
import { type WorkloadInstanceName, type WorkloadSpec, instanceKey, parseInstanceKey } from '../../workload.js';
import { type Cli, CliError } from '../base/cli.js';
import { RuntimeConfigError } from '../base/run-config.js';
import { readOwnRecord, writeOwnFile } from '../../drivers/own-file.js';
import { type DesiredUnitState, parseUnitConfig } from './unit-config.js';
import { type UnitProps, activeSince, parseShow, showArgs, unitExecutionState } from './unit-state.js';
import type { UnitWatch } from './unit-watch.js';
import { BRIDGE_ARGS } from './events.js';

/** A systemd workload's handle: its unit, the manager its general options select, and what the workload asks of it. */
export interface UnitId {
  /** The workload instance that manages the unit (its key). */
  readonly instance: string;
  readonly unit: string;
  readonly options: readonly string[];
  readonly desired: DesiredUnitState;
  /** The agent started the unit (it was not running when the workload took it over): a delete stops it. */
  readonly started: boolean;
}

/** The active states of a unit that runs, or is about to: one found so is not the agent's to stop. */
const RUNNING = new Set(['active', 'reloading', 'activating']);

/** systemctl's options for every call: never ask for a password (it would wait for ever), never page. */
const QUIET = ['--no-ask-password', '--no-pager'];
/** A restart asked of a unit that became active this recently is taken as done (the agent it restarted asks again). */
export const RECENT_START_US = 3_000_000;

/** `systemctl [options] show` of units, read. */
/** A conversation with the system manager's bus through `systemd-stdio-bridge`: what goes in, the bytes that come back. */
export const busConversation =
  (bridge: Cli) =>
  (input$: Observable<string>): Observable<Buffer> =>
    bridge.conversation(BRIDGE_ARGS, input$);

export const showUnits = (systemctl: Cli, options: readonly string[], units: readonly string[]): Observable<Map<string, UnitProps>> =>
  systemctl.run([...QUIET, ...options, ...showArgs(units)], { kind: 'query' }).pipe(map(parseShow));

export class SystemdRuntime implements RuntimeConnector<UnitId> {
  readonly name = 'systemd';

  /**
   * `watchIn(options)`: the watch of the manager the options select; `record`: the units the agent manages,
   * kept across its runs (none: an agent started again finds none); `monotonicUs`: the clock systemd's
   * timestamps count on.
   */
  constructor(
    private readonly systemctl: Cli,
    private readonly journalctl: Cli,
    private readonly watchIn: (options: readonly string[]) => UnitWatch,
    private readonly record?: UnitRecord,
    private readonly monotonicUs: () => number = () => Number(process.hrtime.bigint() / 1000n),
  ) {}

  /** The units the record holds for this agent, each with its unit's state now. */
  listReusableWorkloads(agentName: string): Observable<ExistingWorkload<UnitId>[]> {
    return defer(() => {
      const kept = (this.record?.all() ?? []).flatMap((id) => {
        const instanceName = parseInstanceKey(id.instance);
        return instanceName?.agentName === agentName ? [{ instanceName, id }] : [];
      });
      if (kept.length === 0) return of([]);
      const scopes = [...new Set(kept.map((k) => k.id.options.join('\0')))];
      return forkJoin(
        scopes.map((scope) => {
          const inScope = kept.filter((k) => k.id.options.join('\0') === scope);
          return showUnits(this.systemctl, inScope[0].id.options, [...new Set(inScope.map((k) => k.id.unit))]).pipe(
            map((shown) => inScope.map((k) => ({ ...k, runtime: this.name, state: unitExecutionState(shown.get(k.id.unit) ?? {}) }))),
          );
        }),
      ).pipe(map((lists) => lists.flat()));
    });
  }

  /**
   * Brings the unit to the state the workload asks: started, stopped, or restarted (not when it became active in
   * the last 3 s). A unit has nothing to mount a Control Interface or files into: a workload that asks for them
   * is refused, as is one whose unit does not exist.
   */
  createWorkload(spec: WorkloadSpec, options: CreateOptions): Observable<UnitId> {
    return defer(() => {
      if (options.controlInterfacePath !== undefined) {
        throw new RuntimeConfigError('The systemd runtime has no Control Interface: a unit has nothing the agent could mount its pipes into.');
      }
      if ((options.fileMounts?.length ?? 0) > 0)
        throw new RuntimeConfigError('The systemd runtime takes no workload files: a unit has nothing the agent could mount them into.');
      const config = parseUnitConfig(spec.runtimeConfig);
      const id = { instance: instanceKey(spec.instanceName), unit: config.serviceName, options: config.generalOptions, desired: config.desiredState };
      const started$ = id.desired === 'stopped' ? of(false) : this.runs(id).pipe(map((runs) => !runs));
      return started$.pipe(
        mergeMap((started) =>
          concat(
            this.apply(id),
            defer(() => {
              this.record?.set({ ...id, started });
              return of({ ...id, started });
            }),
          ),
        ),
      );
    });
  }

  /** Whether the unit runs now; one whose state cannot be read counts as running (it is then never stopped at delete). */
  private runs(id: Omit<UnitId, 'started'>): Observable<boolean> {
    return showUnits(this.systemctl, id.options, [id.unit]).pipe(
      map((shown) => RUNNING.has(shown.get(id.unit)?.ActiveState ?? '')),
      catchError(() => of(true)),
    );
  }

  getWorkloadId(instanceName: WorkloadInstanceName): Observable<UnitId | undefined> {
    return defer(() => of(this.record?.get(instanceKey(instanceName))));
  }

  checkState(id: UnitId): Observable<ExecutionState> {
    return this.watchIn(id.options)
      .watch(id.unit)
      .pipe(
        filter((props) => props.ActiveState !== undefined),
        map(unitExecutionState),
        distinctUntilChanged(sameState),
      );
  }

  /** A restart by the workload's restart policy: what it asks of its unit, once more. */
  startAgain(id: UnitId): Observable<void> {
    return this.apply(id);
  }

  /**
   * Delete: a unit the agent started is stopped (it stays installed), one it found running is left as found; either
   * is no longer the agent's.
   */
  deleteWorkload(id: UnitId): Observable<void> {
    const stop$ = id.started ? this.systemctlOn(id, 'stop').pipe(catchError((err: unknown) => (isMissing(err) ? EMPTY : throwError(() => err)))) : EMPTY;
    return concat(stop$, this.forget(id));
  }

  deleteByName(instanceName: WorkloadInstanceName): Observable<void> {
    return defer(() => {
      const id = this.record?.get(instanceKey(instanceName));
      return id ? this.deleteWorkload(id) : EMPTY;
    });
  }

  /** The unit's journal (its lines and systemd's of it), without the journal's prefix of time and host, as a container's logs are its output. */
  logs(id: UnitId, options: LogsOptions, paused$?: Observable<boolean>): Observable<string> {
    return this.journalctl.lines(
      [
        ...id.options,
        '--no-pager',
        '--quiet',
        '--output=cat',
        `--unit=${id.unit}`,
        ...(options.follow ? ['--follow'] : []),
        ...(options.since ? [`--since=${options.since}`] : []),
        ...(options.until ? [`--until=${options.until}`] : []),
        ...(options.tail !== undefined && options.tail >= 0 ? [`--lines=${options.tail}`] : []),
      ],
      paused$,
    );
  }

  /** The unit brought to the state the workload asks. A start whose job failed is done: the unit's state tells the failure. */
  private apply(id: Omit<UnitId, 'started'>): Observable<never> {
    const action$ = (): Observable<never> => {
      switch (id.desired) {
        case 'running':
          return this.systemctlOn(id, 'start');
        case 'stopped':
          return this.systemctlOn(id, 'stop');
        case 'restarted':
          return showUnits(this.systemctl, id.options, [id.unit]).pipe(
            // A clock of another machine (--host, --machine) is not this one's: such a unit is restarted.
            map((shown) => id.options.length === 0 && activeSince(shown.get(id.unit) ?? {}, this.monotonicUs(), RECENT_START_US)),
            catchError(() => of(false)),
            mergeMap((fresh) => (fresh ? EMPTY : this.systemctlOn(id, 'restart'))),
          );
      }
    };
    return defer(action$).pipe(
      catchError((err: unknown) => {
        if (isMissing(err)) return throwError(() => new RuntimeConfigError(`The unit '${id.unit}' does not exist: ${(err as Error).message}`));
        if (err instanceof CliError && /Job for .* failed/.test(err.message)) return EMPTY;
        return throwError(() => err);
      }),
    );
  }

  private systemctlOn(id: Omit<UnitId, 'started'>, verb: 'start' | 'stop' | 'restart'): Observable<never> {
    return this.systemctl.run([...QUIET, ...id.options, verb, id.unit]).pipe(ignoreElements());
  }

  private forget(id: UnitId): Observable<never> {
    return defer(() => {
      this.record?.forget(id);
      return EMPTY;
    });
  }
}

/** What systemctl says of a unit it does not know (not of a manager it cannot reach: that is tried again). */
const isMissing = (err: unknown) => err instanceof CliError && /Unit \S+ (not found|not loaded|could not be found)/i.test(err.message);

/** The units the agent manages, by instance, in a file of its io folder: read once, written at each change. */
export class UnitRecord {
  private units?: Map<string, UnitId>;

  constructor(
    private readonly file: string,
    private readonly warn: (text: string) => void = () => undefined,
  ) {}

  all(): UnitId[] {
    return [...this.read().values()];
  }

  get(key: string): UnitId | undefined {
    return this.read().get(key);
  }

  set(id: UnitId): void {
    this.read().set(id.instance, id);
    this.write();
  }

  forget(id: UnitId): void {
    if (this.read().delete(id.instance)) this.write();
  }

  private read(): Map<string, UnitId> {
    if (this.units) return this.units;
    this.units = new Map();
    const kept = readOwnRecord(
      this.file,
      MAX_RECORD_BYTES,
      (text) => JSON.parse(text) as Record<string, unknown> | null,
      (text) => this.warn(`${text} The agent manages no unit it knows of.`),
    );
    for (const [key, value] of Object.entries(kept ?? {})) {
      const id = parseInstanceKey(key) && asUnitId(key, value);
      if (id && this.units.size < MAX_RECORDED) this.units.set(key, id);
    }
    return this.units;
  }

  private write(): void {
    writeOwnFile(this.file, JSON.stringify(Object.fromEntries(this.read())));
  }
}

const MAX_RECORD_BYTES = 4 * 2 ** 20;
const MAX_RECORDED = 10_000;

/** A kept entry, when it is one (the file may be from another version, or broken). */
function asUnitId(instance: string, value: unknown): UnitId | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { unit, options, desired, started } = value as Record<string, unknown>;
  if (typeof unit !== 'string' || !Array.isArray(options) || !options.every((o) => typeof o === 'string')) return undefined;
  if (desired !== 'running' && desired !== 'stopped' && desired !== 'restarted') return undefined;
  try {
    const config = parseUnitConfig(JSON.stringify({ serviceName: unit, desiredState: desired, generalOptions: options }));
    // A record of an older agent does not say who started the unit: it is left as found.
    return { instance, unit: config.serviceName, options: config.generalOptions, desired: config.desiredState, started: started === true };
  } catch {
    return undefined;
  }
}

/** The record of a runtime whose agent has an io folder. */
export const unitRecord = (folder: string | undefined, warn?: (text: string) => void): UnitRecord | undefined =>
  folder ? new UnitRecord(path.join(folder, 'systemd-units.json'), warn) : undefined;
