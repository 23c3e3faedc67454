// The Control Interfaces of all workloads as a stream: what the pipes, the server and the connection say
// goes through the rules of lib/control-interface/session.ts; this stream only reads the frames and writes what
// the rules decide (requests for the server, frames for the workloads, log lines).
import { type Observable, catchError, concat, defer, endWith, map, merge, mergeMap, of, scan } from 'rxjs';
import { CONTROL_API_FRAMES, encodeFromAnkaios } from '../lib/codec/control-api.js';
import type { Request, Response } from '../lib/codec/control-api.js';
import type { Connection } from '../lib/control-interface/connection.js';
import {
  type ControlInterfaceEffect,
  type ControlInterfaceInput,
  type ControlInterfacesStep,
  NO_CONTROL_INTERFACES,
  stepControlInterfaces,
} from '../lib/control-interface/session.js';
import type { ControlInterfacePipe, WorkloadFrame } from '../lib/ports.js';
import { decodeFrames, encodeFrame } from './length-delimited.js';

export type ControlInterfaceOutput =
  | { readonly kind: 'toServer'; readonly request: Request }
  | { readonly kind: 'toWorkload'; readonly frame: WorkloadFrame }
  | { readonly kind: 'log'; readonly level: 'warn' | 'debug'; readonly text: string }
  | { readonly kind: 'authorized'; readonly workloadName: string; readonly allowed: boolean };

export interface ControlInterfaceSources {
  /** Each workload's pipes as they are opened. */
  readonly pipes$: Observable<ControlInterfacePipe>;
  /** The server's responses to the workloads' requests (prefixed request ids). */
  readonly responses$: Observable<Response>;
  /** The server connection: whether it is up, and which protocol lines a workload may speak (replays the latest). */
  readonly connection$: Observable<Connection>;
  /** Frames the pipes could not deliver: the workload is gone from its Control Interface. */
  readonly undelivered$: Observable<WorkloadFrame>;
}

/** A pipe's life as inputs of the rules: opened, each frame, closed (with the error that ended reading, if one did). */
function pipeInputs(pipe: ControlInterfacePipe, number: number): Observable<ControlInterfaceInput> {
  const { workloadName } = pipe;
  const closed: ControlInterfaceInput = { kind: 'closed', pipe: number, workloadName };
  const frames$ = pipe.chunks$.pipe(
    decodeFrames(CONTROL_API_FRAMES),
    map((frame): ControlInterfaceInput => ({ kind: 'frame', pipe: number, workloadName, frame })),
    endWith(closed),
    catchError((err: unknown) => of<ControlInterfaceInput>({ ...closed, error: String(err) })),
  );
  return concat(of<ControlInterfaceInput>({ kind: 'opened', pipe: number, workloadName, access: pipe.access }), frames$);
}

/** An effect of the rules as output: a message for a workload is encoded in the line its session speaks. */
function outputOf(effect: ControlInterfaceEffect): ControlInterfaceOutput {
  if (effect.kind !== 'toWorkload') return effect;
  const bytes = encodeFrame(effect.line.write(encodeFromAnkaios(effect.message)));
  return { kind: 'toWorkload', frame: { workloadName: effect.workloadName, bytes, ...(effect.logStream && { logStream: effect.logStream }) } };
}

/** The sessions on every opened pipe, and the routing of responses back to them. */
export function controlInterfaces({ pipes$, responses$, connection$, undelivered$ }: ControlInterfaceSources): Observable<ControlInterfaceOutput> {
  return defer(() => {
    const inputs$: Observable<ControlInterfaceInput> = merge(
      connection$.pipe(map((connection): ControlInterfaceInput => ({ kind: 'connection', connection }))),
      pipes$.pipe(mergeMap(pipeInputs)),
      responses$.pipe(map((response): ControlInterfaceInput => ({ kind: 'response', response }))),
      undelivered$.pipe(mergeMap((frame): ControlInterfaceInput[] => (frame.logStream ? [{ kind: 'undelivered', logStream: frame.logStream }] : []))),
    );
    return inputs$.pipe(
      scan((step: ControlInterfacesStep, input) => stepControlInterfaces(step.state, input), { state: NO_CONTROL_INTERFACES, effects: [] }),
      mergeMap((step) => step.effects.map(outputOf)),
    );
  });
}
