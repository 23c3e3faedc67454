// The server connection as the Control Interfaces and the load status see it, told by the link's words.
import { PROTOCOL_LINES } from '../codec/lines.js';
import type { ProtocolLine } from '../version.js';
import type { FromServer } from '../messages.js';

export interface Connection {
  readonly online: boolean;
  /** The protocol lines a workload may speak. */
  readonly lines: readonly ProtocolLine[];
}

/**
 * Before a server accepted the agent: offline, and every line the agent speaks (standalone mode
 * stays so: the workload's Hello decides).
 */
export const NOT_CONNECTED: Connection = { online: false, lines: PROTOCOL_LINES };

/** The connection after `message`: a connection brings its server's lines, which stay when it goes. */
export function nextConnection(connection: Connection, message: FromServer): Connection {
  if (message.kind === 'connected') return { online: true, lines: message.lines };
  if (message.kind === 'disconnected') return { ...connection, online: false };
  return connection;
}
