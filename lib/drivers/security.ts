// Reads and checks the PEM files for mTLS, naming the file in every error.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { type AgentConfig, ConfigError, type PemSource } from '../config.js';
import type { Security } from './grpc-call.js';

export type Item = 'CA certificate' | 'agent certificate' | 'agent key';

/**
 * swdd~grpc-checks-given-PEM-file-for-proper-unix-file-permission~2: a key may be read and written by its
 * owner only; a certificate may also be read by anyone, but written by its owner only and executed by
 * nobody. Says what is wrong with `mode`, if anything.
 */
export function pemModeProblem(mode: number, item: Item): string | undefined {
  const permissions = mode & 0o777;
  const octal = permissions.toString(8).padStart(3, '0');
  if (item === 'agent key') {
    return (permissions & 0o177) === 0 ? undefined : `has permissions ${octal}: a private key may only be readable and writable by its owner ('chmod 600')`;
  }
  return (permissions & 0o133) === 0
    ? undefined
    : `has permissions ${octal}: a certificate may be written only by its owner and executed by nobody ('chmod 644')`;
}

function read(source: PemSource, item: Item): { pem: Buffer; where: string } {
  if ('content' in source) return { pem: Buffer.from(source.content), where: `'${source.key}' of the agent config` };
  const where = `file '${source.path}'`;
  try {
    const pem = readFileSync(source.path);
    const problem = pemModeProblem(statSync(source.path).mode, item);
    if (problem) throw new ConfigError(`The ${item} ${where} ${problem}.`);
    return { pem, where };
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`Cannot read the ${item} ${where}: ${(err as Error).message}`);
  }
}

function load(source: PemSource, item: Item): Buffer {
  const { pem, where } = read(source, item);
  try {
    if (item === 'agent key') createPrivateKey(pem);
    else new X509Certificate(pem);
  } catch {
    throw new ConfigError(`The ${item} ${where} is not a valid PEM ${item === 'agent key' ? 'private key' : 'certificate'}.`);
  }
  return pem;
}

/** swdd~agent-provides-file-paths-to-communication-middleware~1 */
export function loadSecurity(security: AgentConfig['security']): Security {
  if (security.insecure) return { insecure: true };
  const ca = load(security.ca, 'CA certificate');
  const cert = load(security.cert, 'agent certificate');
  const key = load(security.key, 'agent key');
  if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) {
    throw new ConfigError(
      `The agent key ${read(security.key, 'agent key').where} does not belong to the agent certificate ${read(security.cert, 'agent certificate').where}.`,
    );
  }
  return { insecure: false, ca, cert, key };
}
