// The YAML readers every runtime's config shares (a workload's runtime config is a YAML string), and the error
// of a config a runtime cannot use. Pure.
import { parse as parseYaml } from 'yaml';
import { ConfigurationError } from '../../runtime-connector.js';

/** A runtime config the runtime cannot use; the message names the field. */
export class RuntimeConfigError extends ConfigurationError {}

export function document(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new RuntimeConfigError(`The runtime config is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new RuntimeConfigError('The runtime config must be a YAML mapping.');
  return doc as Record<string, unknown>;
}

export function list(doc: Record<string, unknown>, field: string): string[] {
  const value = doc[field];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')) {
    throw new RuntimeConfigError(`The runtime config field '${field}' must be a list of strings.`);
  }
  return value.map(String);
}

export function text(doc: Record<string, unknown>, field: string): string {
  const value = doc[field];
  if (value === undefined || value === null || value === '') throw new RuntimeConfigError(`The runtime config field '${field}' is missing.`);
  if (typeof value !== 'string') throw new RuntimeConfigError(`The runtime config field '${field}' must be a string.`);
  return value;
}
