// The agent's first message, encoded by hand: a ToServer holding an AgentHello (ANKAIOS-WIRE's field numbers:
// ToServer.agentHello = 1; AgentHello.agentName = 1, protocolVersion = 2, tags = 3; Tags.tags = 1, a map whose
// entries are key = 1, value = 2). The agent sends it before it loads its protobuf code (bin/main.ts); the
// bytes are those @bufbuild/protobuf writes for the same message (spec/lib/hello.spec.ts). Pure.

const encoder = new TextEncoder();

/** A varint. */
function varint(value: number): number[] {
  const bytes: number[] = [];
  let v = value;
  while (v > 0x7f) {
    bytes.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  bytes.push(v);
  return bytes;
}

/** A length-delimited field (wire type 2); a proto3 default (empty) is left out unless `always` (a map entry's key and value never are). */
function field(number: number, body: Uint8Array | number[], always = false): number[] {
  if (body.length === 0 && !always) return [];
  return [...varint((number << 3) | 2), ...varint(body.length), ...body];
}

const text = (number: number, value: string, always = false) => field(number, encoder.encode(value), always);

/** ToServer { agentHello { agentName, protocolVersion, tags } }, tags left out when there are none. */
export function encodeAgentHello(agentName: string, protocolVersion: string, tags: Readonly<Record<string, string>>): Uint8Array {
  const entries = Object.entries(tags).flatMap(([key, value]) => field(1, [...text(1, key, true), ...text(2, value, true)], true));
  const hello = [...text(1, agentName), ...text(2, protocolVersion), ...(entries.length > 0 ? field(3, entries, true) : [])];
  return Uint8Array.from(field(1, hello, true));
}
