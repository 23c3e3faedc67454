// mTLS for the server connection as a released Ankaios server takes it: the agent presents its own
// certificate alone. OpenSSL, handed the CA for checking the server, also appends the CA to the
// certificate the client presents; a released server refuses such a connection ("Ambiguous agent
// certificates provided!"). So the TLS context here holds only the agent's key and certificate, and the
// server's certificate is checked against the CA by the code below, before a byte of gRPC is sent.
import { X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import tls, { type DetailedPeerCertificate } from 'node:tls';
import * as grpc from '@grpc/grpc-js';

/** How deep a chain the server may present (leaf, intermediates) before it must reach the CA. */
const MAX_CHAIN = 5;

const certificatesOf = (pem: Buffer): X509Certificate[] =>
  (pem.toString().match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((c) => new X509Certificate(c));

const inForce = (cert: X509Certificate, now: number) => Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo);

/**
 * Why the server's certificate (with the chain it presented) is not to be trusted, or undefined when it
 * is: it names `serverName`, every link is in force and signed by the next, and the chain ends at a CA
 * certificate of `anchors`.
 */
export function serverCertificateProblem(
  peer: DetailedPeerCertificate,
  anchors: readonly X509Certificate[],
  serverName: string,
  now = Date.now(),
): string | undefined {
  if (!peer.raw) return 'the server presented no certificate';
  const identity = tls.checkServerIdentity(serverName, peer);
  if (identity) return identity.message;
  let link: DetailedPeerCertificate | undefined = peer;
  for (let depth = 0; link?.raw && depth < MAX_CHAIN; depth++) {
    const cert = new X509Certificate(link.raw);
    if (!inForce(cert, now)) return `the certificate '${cert.subject}' is not in force (${cert.validFrom} to ${cert.validTo})`;
    if (anchors.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey))) return undefined;
    const issuer: DetailedPeerCertificate | undefined = link.issuerCertificate;
    if (!issuer?.raw || issuer === link || issuer.raw.equals(link.raw)) break;
    const next = new X509Certificate(issuer.raw);
    if (!next.ca || !cert.checkIssued(next) || !cert.verify(next.publicKey))
      return `the certificate '${cert.subject}' is not signed by the one presented above it`;
    link = issuer;
  }
  return 'the server certificate is not signed by the CA';
}

class AgentTlsCredentials extends grpc.ChannelCredentials {
  private readonly context: tls.SecureContext;
  private readonly anchors: X509Certificate[];

  constructor(
    ca: Buffer,
    cert: Buffer,
    key: Buffer,
    private readonly serverName: string,
  ) {
    super();
    this.context = tls.createSecureContext({ cert, key });
    this.anchors = certificatesOf(ca);
  }

  _isSecure(): boolean {
    return true;
  }

  _equals(other: grpc.ChannelCredentials): boolean {
    return other === this;
  }

  _createSecureConnector(_target: unknown, _options: unknown, callCredentials?: grpc.CallCredentials) {
    const { context, anchors, serverName } = this;
    return {
      connect: (socket: Socket) =>
        new Promise<{ socket: tls.TLSSocket; secure: boolean }>((resolve, reject) => {
          // Not rejected by Node (it has no CA to check with): checked below instead.
          const secured = tls.connect({ socket, secureContext: context, servername: serverName, ALPNProtocols: ['h2'], rejectUnauthorized: false }, () => {
            const problem = serverCertificateProblem(secured.getPeerCertificate(true), anchors, serverName);
            if (problem) {
              secured.destroy();
              reject(new Error(`The server's certificate is refused: ${problem}.`));
              return;
            }
            resolve({ socket: secured, secure: true });
          });
          secured.on('error', reject);
        }),
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => callCredentials ?? grpc.CallCredentials.createEmpty(),
      destroy: () => undefined,
    };
  }
}

/** Credentials of an agent: its certificate alone, the server's checked against `ca` for the name `serverName`. */
export function agentTlsCredentials(ca: Buffer, cert: Buffer, key: Buffer, serverName: string): grpc.ChannelCredentials {
  return new AgentTlsCredentials(ca, cert, key, serverName);
}
