// The control_api wire messages a Control Interface reads and writes.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { Request, Response } from '../../proto/gen/ank_base_pb.js';
import type { FromAnkaios, ToAnkaios } from '../../proto/gen/control_api_pb.js';
import { ankBase, controlApi } from './descriptors.cjs';
import type { Access } from '../authorizer.js';

export type { FromAnkaios, Request, Response, ToAnkaios };

/** undefined when the bytes do not decode as a ToAnkaios message. */
export function decodeToAnkaios(bytes: Uint8Array): ToAnkaios | undefined {
  try {
    return fromBinary(controlApi().ToAnkaiosSchema, bytes);
  } catch {
    return undefined;
  }
}

export const encodeFromAnkaios = (m: FromAnkaios): Uint8Array => toBinary(controlApi().FromAnkaiosSchema, m);

export const FromAnkaiosMessage = {
  accepted: (): FromAnkaios => create(controlApi().FromAnkaiosSchema, { FromAnkaiosEnum: { case: 'controlInterfaceAccepted', value: {} } }),
  closed: (reason: string): FromAnkaios => create(controlApi().FromAnkaiosSchema, { FromAnkaiosEnum: { case: 'connectionClosed', value: { reason } } }),
  response: (response: Response): FromAnkaios => create(controlApi().FromAnkaiosSchema, { FromAnkaiosEnum: { case: 'response', value: response } }),
  error: (requestId: string, message: string): FromAnkaios =>
    FromAnkaiosMessage.response(create(ankBase().ResponseSchema, { requestId, ResponseContent: { case: 'error', value: { message } } })),
};

/** What a request asks for, in the terms of the authorizer; undefined for an empty request. */
export function accessOf(request: Request): Access | undefined {
  const c = request.RequestContent;
  switch (c.case) {
    case 'completeStateRequest':
      return { kind: 'read', paths: c.value.fieldMask };
    case 'updateStateRequest':
      return { kind: 'write', paths: c.value.updateMask };
    case 'logsRequest':
      return { kind: 'logs', workloadNames: c.value.workloadNames.map((n) => n.workloadName) };
    case 'logsCancelRequest':
      return { kind: 'cancelLogs' };
    case 'eventsCancelRequest':
      return { kind: 'cancelEvents' };
    default:
      return undefined;
  }
}

/**
 * Frames on a Control Interface output pipe are ToAnkaios messages; a Hello starts a session afresh. A
 * complete frame that does not decode is the session's business (it skips it); only a broken length
 * prefix makes the framing hunt for the next Hello.
 */
export const CONTROL_API_FRAMES = {
  /** ToAnkaios field 1 (hello), length-delimited. */
  resyncFirstByte: 0x0a,
  isResyncPoint: (bytes: Uint8Array) => {
    // A Hello is `0a <n> 12 <n-2> <version>`: anything else is passed over without decoding.
    if (bytes.length < 4 || bytes[0] !== 0x0a || bytes[1] !== bytes.length - 2 || bytes[2] !== 0x12 || bytes[3] !== bytes.length - 4) return false;
    const m = decodeToAnkaios(bytes);
    return m?.ToAnkaiosEnum.case === 'hello' && /^v?\d+\.\d+\.\d+/.test(m.ToAnkaiosEnum.value.protocolVersion);
  },
};
