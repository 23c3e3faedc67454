// Two messages encoded by hand, the bytes @bufbuild/protobuf writes for them (spec/lib/hello.spec.ts). The
// agent's first: a ToServer holding an AgentHello (ToServer.agentHello = 1; AgentHello.agentName = 1,
// protocolVersion = 2, tags = 3; Tags.tags = 1, a map whose entries are key = 1, value = 2), sent before the
// agent loads its protobuf code (bin/main.ts). And the one it sends every 2 s, even idle: a ToServer holding an
// AgentLoadStatus (ToServer.AgentLoadStatus = 5; agentName = 1, cpuUsage = 2 { cpuUsage = 1 },
// freeMemory = 3 { freeMemory = 1 }), which by reflection cost more than the rest of an idle agent. Pure.

const encoder = new TextEncoder();

/** A varint (of a whole number below 2^53). */
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

/** A varint field (wire type 0); a proto3 default (0) is left out. */
const number = (field: number, value: number) => (value === 0 ? [] : [...varint(field << 3), ...varint(value)]);

/** ToServer { AgentLoadStatus { agentName, cpuUsage { cpuUsage }, freeMemory { freeMemory } } }. */
export function encodeAgentLoadStatus(agentName: string, cpuUsage: number, freeMemory: number): Uint8Array {
  const status = [...text(1, agentName), ...field(2, number(1, cpuUsage), true), ...field(3, number(1, freeMemory), true)];
  return Uint8Array.from(field(5, status, true));
}
