// The one guard for objects read from outside (YAML, JSON, protobuf Struct values).

/** An object with named fields: not null, not an array. */
export const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
