// One workload's conversation on its Control Interface: Hello first, then authorized requests.
import { Observable, defer, mergeMap } from 'rxjs';
import { isAllowed } from '../lib/authorizer.js';
import { type FromAnkaios, FromAnkaiosMessage, type Request, accessOf, decodeToAnkaios } from '../lib/codec/control-api.js';
import { PROTOCOL_VERSION, compatibleVersions } from '../lib/version.js';
import type { ControlInterfaceAccess } from '../lib/workload.js';
import type { Frame } from './length-delimited.js';

export type SessionOutput =
  | { readonly kind: 'toWorkload'; readonly message: FromAnkaios }
  | { readonly kind: 'toServer'; readonly request: Request }
  | { readonly kind: 'log'; readonly level: 'warn' | 'debug'; readonly text: string };

export const INITIAL_HELLO_MISSING = 'Initial Hello missing!';
export const ACCESS_DENIED = 'Access denied';

/** The workload name in front of request ids on the way to the server (swdd~agent-adds-workload-prefix-id-control-interface-request~1). */
export const prefixed = (workloadName: string, requestId: string) => `${workloadName}@${requestId}`;

/**
 * swdd~agent-listens-for-requests-from-pipe~1, swdd~agent-converts-control-interface-message-to-ankaios-object~1,
 * swdd~agent-forward-request-from-control-interface-pipe-to-server~1: a session is opened by a compatible Hello and
 * closed by anything else before it; a closed session ignores all but a new Hello, which starts it again.
 */
export function controlSession(workloadName: string, access: ControlInterfaceAccess, frames$: Observable<Frame>): Observable<SessionOutput> {
  return defer(() => {
    let phase: 'new' | 'open' | 'closed' = 'new';
    const toWorkload = (message: FromAnkaios): SessionOutput => ({ kind: 'toWorkload', message });
    const log = (level: 'warn' | 'debug', text: string): SessionOutput => ({ kind: 'log', level, text });
    const close = (reason: string): SessionOutput[] => {
      phase = 'closed';
      return [toWorkload(FromAnkaiosMessage.closed(reason)), log('warn', `Closed the Control Interface of '${workloadName}': ${reason}`)];
    };
    return frames$.pipe(mergeMap((frame): SessionOutput[] => {
      const message = frame.kind === 'frame' ? decodeToAnkaios(frame.bytes) : undefined;
      const content = message?.ToAnkaiosEnum;
      if (content?.case === 'hello') {
        const version = content.value.protocolVersion;
        if (!compatibleVersions(PROTOCOL_VERSION, version)) {
          return close(`Unsupported protocol version '${version}'. Currently supported: '${PROTOCOL_VERSION}'.`);
        }
        phase = 'open';
        return [toWorkload(FromAnkaiosMessage.accepted()), log('debug', `Control Interface of '${workloadName}' accepted (version ${version}).`)];
      }
      if (phase === 'closed') return [log('debug', `Ignored data on the closed Control Interface of '${workloadName}' until a new Hello.`)];
      if (content?.case !== 'request') {
        return close(`Received malformed data (${frame.kind === 'garbage' ? frame.reason : 'not a Control Interface message'}).`);
      }
      if (phase === 'new') return close(INITIAL_HELLO_MISSING);
      const request = content.value;
      const wanted = accessOf(request);
      if (!wanted || !isAllowed(access, wanted)) {
        return [
          toWorkload(FromAnkaiosMessage.error(request.requestId, ACCESS_DENIED)),
          log('debug', `Denied request '${request.requestId}' of '${workloadName}' (${wanted?.kind ?? 'empty request'}).`),
        ];
      }
      return [{ kind: 'toServer', request: { ...request, requestId: prefixed(workloadName, request.requestId) } }];
    }));
  });
}
