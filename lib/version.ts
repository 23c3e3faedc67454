// Versions: which of a peer's versions the agent can speak with, and the protocol lines it speaks.

/** Semver compatibility: equal majors and, while the major is 0, equal minors too. */
export function compatibleVersions(ours: string, theirs: string): boolean {
  const parse = (v: string) => /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim());
  const a = parse(ours),
    b = parse(theirs);
  if (!a || !b) return false;
  return a[1] === b[1] && (a[1] !== '0' || a[2] === b[2]);
}

/** A protocol line the agent speaks (lib/codec/lines.ts has them): its version, what it carries, how its bytes differ. */
export interface ProtocolLine {
  /** How a server names the line when it refuses another: `1` or `0.8`. */
  readonly name: string;
  /** The version the agent says on this line. */
  readonly version: string;
  /** Events (CompleteStateRequest.subscribeForEvents, EventsCancelRequest) and agent tags exist on this line. */
  readonly events: boolean;
  /** A FromServer or FromAnkaios as a peer of this line writes it → as the agent reads it (the 1.x form). */
  readonly read: (bytes: Uint8Array) => Uint8Array;
  /** A FromServer or FromAnkaios as the agent writes it → as a peer of this line reads it. */
  readonly write: (bytes: Uint8Array) => Uint8Array;
}
