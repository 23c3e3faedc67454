// One workload's conversation on its Control Interface: Hello first, then validated, authorized requests.
import { create } from '@bufbuild/protobuf';
import { type Observable, defer, map, merge, mergeMap } from 'rxjs';
import { ResponseSchema } from '../proto/gen/ank_base_pb.js';
import { isAllowed } from '../lib/authorizer.js';
import { type ProtocolLine, lineOf } from '../lib/codec/lines.js';
import { type FromAnkaios, FromAnkaiosMessage, type Request, accessOf, decodeToAnkaios } from '../lib/codec/control-api.js';
import type { ControlInterfaceAccess } from '../lib/workload.js';
import { type Frame, MAX_FRAME_BYTES } from './length-delimited.js';

export type SessionOutput =
  /** A message for the workload, to be written as `line` writes it. */
  | { readonly kind: 'toWorkload'; readonly message: FromAnkaios; readonly line: ProtocolLine }
  | { readonly kind: 'toServer'; readonly request: Request }
  /** The session speaks `line` from now on (undefined: closed). */
  | { readonly kind: 'line'; readonly line?: ProtocolLine }
  | { readonly kind: 'log'; readonly level: 'warn' | 'debug'; readonly text: string };

/** The released agent's words. */
export const INITIAL_HELLO_MISSING = 'Initial Hello missing!';
export const UNDECODABLE = 'Could not decode protobuf data';
export const ACCESS_DENIED = 'Access denied';

/** The workload name in front of request ids on the way to the server (swdd~agent-adds-workload-prefix-id-control-interface-request~1). */
export const prefixed = (workloadName: string, requestId: string) => `${workloadName}@${requestId}`;

const unsupported = (version: string, lines: readonly ProtocolLine[]) =>
  `Unsupported protocol version '${version}'. Currently supported '${lines.map((l) => l.name).join("', '")}'`;

type Input = { readonly frame: Frame } | { readonly lines: readonly ProtocolLine[] };

/**
 * swdd~agent-listens-for-requests-from-pipe~1, swdd~agent-converts-control-interface-message-to-ankaios-object~1,
 * swdd~agent-forward-request-from-control-interface-pipe-to-server~2: a session is opened by a Hello of one of
 * the lines `lines$` currently allows (the server's line; every line in standalone mode) and closed by anything
 * else before it, or when the server's line changes to one the session does not speak; a closed session ignores
 * all but a new Hello, which starts it again.
 */
export function controlSession(
  workloadName: string,
  access: ControlInterfaceAccess,
  frames$: Observable<Frame>,
  lines$: Observable<readonly ProtocolLine[]>,
): Observable<SessionOutput> {
  return defer(() => {
    let phase: 'new' | 'open' | 'closed' = 'new';
    let lines: readonly ProtocolLine[] = [];
    let spoken: ProtocolLine | undefined;
    let version = '';
    const toWorkload = (message: FromAnkaios): SessionOutput => ({ kind: 'toWorkload', message, line: spoken ?? lines[0] });
    const log = (level: 'warn' | 'debug', text: string): SessionOutput => ({ kind: 'log', level, text });
    const close = (reason: string): SessionOutput[] => {
      const out = [
        toWorkload(FromAnkaiosMessage.closed(reason)),
        { kind: 'line' as const },
        log('warn', `Closed the Control Interface of '${workloadName}': ${reason}`),
      ];
      [phase, spoken] = ['closed', undefined];
      return out;
    };
    const onLines = (next: readonly ProtocolLine[]): SessionOutput[] => {
      lines = next;
      return phase === 'open' && spoken && !next.includes(spoken) ? close(unsupported(version, next)) : [];
    };
    const onFrame = (frame: Frame): SessionOutput[] => {
      const message = frame.kind === 'frame' ? decodeToAnkaios(frame.bytes) : undefined;
      const content = message?.ToAnkaiosEnum;
      if (content?.case === 'hello') {
        version = content.value.protocolVersion;
        const line = lineOf(version, lines);
        if (!line) return close(unsupported(version, lines));
        [phase, spoken] = ['open', line];
        return [
          toWorkload(FromAnkaiosMessage.accepted()),
          { kind: 'line', line },
          log('debug', `Control Interface of '${workloadName}' accepted (version ${version}, the ${line.name} line).`),
        ];
      }
      if (phase === 'closed') return [log('debug', `Ignored data on the closed Control Interface of '${workloadName}' until a new Hello.`)];
      // An accepted session goes on after a frame too large to take, as with the released agent (which reads any size).
      if (frame.kind === 'oversized' && phase === 'open')
        return [log('warn', `Skipped a message of ${frame.size} bytes of '${workloadName}': over ${MAX_FRAME_BYTES} bytes.`)];
      // Lost framing cannot be trusted again before a Hello; a frame that does not decode is skipped once a session is open.
      if (frame.kind !== 'frame' || (!message && phase === 'new')) return close(UNDECODABLE);
      if (!message) return [log('warn', `Skipped a frame of '${workloadName}' that does not decode as a Control Interface message.`)];
      if (phase === 'new') return close(INITIAL_HELLO_MISSING);
      if (content?.case !== 'request') return [log('warn', `Skipped a message of '${workloadName}' that is neither Hello nor request.`)];
      return request(content.value, spoken!);
    };
    const request = (r: Request, line: ProtocolLine): SessionOutput[] => {
      const answer = (m: FromAnkaios, text: string) => [toWorkload(m), log('debug', `Request '${r.requestId}' of '${workloadName}': ${text}`)];
      const c = r.RequestContent;
      // Nothing a server cannot read may reach it: a 0.8 server drops the agent's whole connection on it.
      // The released agent's authorizer denies a request it cannot read (swdd~agent-checks-request-for-authorization~1).
      if (c.case === undefined) return answer(FromAnkaiosMessage.error(r.requestId, ACCESS_DENIED), 'empty, refused');
      if (!line.events && c.case === 'eventsCancelRequest') {
        return answer(
          FromAnkaiosMessage.response(create(ResponseSchema, { requestId: r.requestId, ResponseContent: { case: 'eventsCancelAccepted', value: {} } })),
          'no events on this line, answered here',
        );
      }
      if (!line.events && c.case === 'completeStateRequest' && c.value.subscribeForEvents) {
        return answer(FromAnkaiosMessage.error(r.requestId, `Events are not available on the ${line.name} line.`), 'events refused');
      }
      const wanted = accessOf(r);
      if (!wanted || !isAllowed(access, wanted)) return answer(FromAnkaiosMessage.error(r.requestId, ACCESS_DENIED), `denied (${wanted?.kind ?? 'unknown'})`);
      return [{ kind: 'toServer', request: { ...r, requestId: prefixed(workloadName, r.requestId) } }];
    };
    return merge(lines$.pipe(map((l): Input => ({ lines: l }))), frames$.pipe(map((frame): Input => ({ frame })))).pipe(
      mergeMap((input) => ('lines' in input ? onLines(input.lines) : onFrame(input.frame))),
    );
  });
}
