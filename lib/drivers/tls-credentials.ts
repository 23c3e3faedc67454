// mTLS for the server connection as a released Ankaios server takes it: the agent presents its own
// certificate alone. OpenSSL, handed the CA for checking the server, also appends the CA to the
// certificate the client presents; a released server refuses such a connection ("Ambiguous agent
// certificates provided!"). So the TLS context of the connection (lib/drivers/grpc-connection.ts) holds only
// the agent's key and certificate, and the server's certificate is checked against the CA by the code below,
// before a byte of gRPC is sent.
import { X509Certificate } from 'node:crypto';
import tls, { type DetailedPeerCertificate } from 'node:tls';

/** How deep a chain the server may present (leaf, intermediates) before it must reach the CA. */
const MAX_CHAIN = 5;

/** The certificates of a PEM bundle (a CA file may hold several). */
export const certificatesOf = (pem: Buffer): X509Certificate[] =>
  (pem.toString().match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((c) => new X509Certificate(c));

/** Extended key usages by their OID, for telling a refusal in words. */
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const USE_NAMES: Record<string, string> = {
  [SERVER_AUTH]: 'serverAuth',
  '1.3.6.1.5.5.7.3.2': 'clientAuth',
  '1.3.6.1.5.5.7.3.3': 'codeSigning',
  '1.3.6.1.5.5.7.3.4': 'emailProtection',
};

/** A certificate that names its extended key usages must name server authentication (as rustls/webpki demand). */
const notForServers = (cert: X509Certificate): string | undefined => {
  const uses = cert.keyUsage;
  if (!uses || uses.includes(SERVER_AUTH)) return undefined;
  return `the certificate '${cert.subject}' is not for server authentication (its uses: ${uses.map((oid) => USE_NAMES[oid] ?? oid).join(', ')})`;
};

const inForce = (cert: X509Certificate, now: number) => Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo);

/**
 * Why the server's certificate (with the chain it presented) is not to be trusted, or undefined when it
 * is: it names `serverName`, every link is in force, allows server authentication where it names its uses, and
 * is signed by the next, and the chain ends at a CA certificate of `anchors`.
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
    const use = notForServers(cert);
    if (use) return use;
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
