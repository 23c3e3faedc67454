// The protocol lines the agent speaks: the 1.x line of released Ankaios and the 0.8 line of Ankaios 0.8.
// The agent reads and writes the 1.x messages; for a peer of the 0.8 line the one field that differs
// (Response field 4: a bare CompleteState instead of a CompleteStateResponse) is converted in the bytes,
// at the edge, so nothing else needs to know which line a peer speaks.
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { LINE_VERSIONS } from '../defaults.js';
import { type ProtocolLine, compatibleVersions } from '../version.js';

/** `response = 3` in both FromServer and FromAnkaios; field 4 of the Response is the one that differs. */
const RESPONSE_FIELD_4 = [3, 4];

/** Replaces the payload of the length-delimited field at `path` (nested field numbers); all else is copied as it is. */
export function rewriteField(bytes: Uint8Array, path: readonly number[], f: (payload: Uint8Array) => Uint8Array): Uint8Array {
  const [field, ...rest] = path;
  const reader = new BinaryReader(bytes);
  const writer = new BinaryWriter();
  while (reader.pos < reader.len) {
    const [no, type] = reader.tag();
    if (no === field && type === WireType.LengthDelimited) {
      const payload = reader.bytes();
      writer.tag(no, type).bytes(rest.length > 0 ? rewriteField(payload, rest, f) : f(payload));
    } else {
      writer.tag(no, type).raw(reader.skip(type, no));
    }
  }
  return writer.finish();
}

/** CompleteState → CompleteStateResponse{completeState}. */
const wrap = (completeState: Uint8Array) => new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(completeState).finish();

/** CompleteStateResponse → its completeState (the altered fields have no place on 0.8). */
function unwrap(response: Uint8Array): Uint8Array {
  const reader = new BinaryReader(response);
  const parts: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [no, type] = reader.tag();
    if (no === 1 && type === WireType.LengthDelimited) parts.push(reader.bytes());
    else reader.skip(type, no);
  }
  // Repeated occurrences of a message field merge, as their concatenation does.
  return Buffer.concat(parts);
}

export const LINE_1: ProtocolLine = { name: '1', version: LINE_VERSIONS['1'], events: true, read: (b) => b, write: (b) => b };

export const LINE_0_8: ProtocolLine = {
  name: '0.8',
  version: LINE_VERSIONS['0.8'],
  events: false,
  read: (bytes) => rewriteField(bytes, RESPONSE_FIELD_4, wrap),
  write: (bytes) => rewriteField(bytes, RESPONSE_FIELD_4, unwrap),
};

/** The lines the agent speaks, the one it tries first first. */
export const PROTOCOL_LINES: readonly ProtocolLine[] = [LINE_1, LINE_0_8];

/** Whether a peer that says `version` speaks this line. */
export const speaks = (line: ProtocolLine, version: string): boolean => compatibleVersions(line.version, version);

/** The line of a peer that says `version`, among `lines`. */
export const lineOf = (version: string, lines: readonly ProtocolLine[] = PROTOCOL_LINES): ProtocolLine | undefined => lines.find((l) => speaks(l, version));

/** The line a server's refusal names (`… Currently supported '0.8'`), if the agent speaks it. */
export function lineOfRefusal(message: string): ProtocolLine | undefined {
  const name = /Currently supported '([^']*)'/.exec(message)?.[1];
  return PROTOCOL_LINES.find((l) => l.name === name);
}
