// Who may ask what through the Control Interface: default deny; an allow rule must match and no deny rule may.
import type { AccessRule, ControlInterfaceAccess, ReadWrite } from './workload.js';

export type Access =
  | { readonly kind: 'read'; readonly paths: readonly string[] }
  | { readonly kind: 'write'; readonly paths: readonly string[] }
  | { readonly kind: 'logs'; readonly workloadNames: readonly string[] }
  | { readonly kind: 'cancelLogs' }
  | { readonly kind: 'cancelEvents' };

/**
 * A mask's segments; the empty request mask (the whole state, whatever fields it has) has none.
 * swdd~agent-authorizing-request-without-filter-mask~2: so only a lone `*` allows it, and every deny rule of
 * the operation denies it (whatever a deny rule protects is part of the whole state).
 */
const segments = (path: string) => (path === '' ? [] : path.split('.'));
const grants = (operation: ReadWrite, kind: 'read' | 'write') => operation === 'ReadWrite' || (kind === 'read' ? operation === 'Read' : operation === 'Write');
const same = (mask: string, part: string) => mask === '*' || mask === part;

/** An allow mask matches a path it is a prefix of (segment by segment, `*` matching one segment); a lone `*` matches all. */
export function allowMaskMatches(mask: string, path: string): boolean {
  if (mask === '') return false;
  if (mask === '*') return true;
  const m = segments(mask);
  const p = segments(path);
  return m.length <= p.length && m.every((s, i) => same(s, p[i]));
}

/** A deny mask matches when it and the path agree on their common length. */
export function denyMaskMatches(mask: string, path: string): boolean {
  if (mask === '') return false;
  const m = segments(mask);
  const p = segments(path);
  return m.slice(0, Math.min(m.length, p.length)).every((s, i) => same(s, p[i]));
}

/** A LogRule name: exact, `*`, or with one `*` standing for any run of characters. */
export function logPatternMatches(pattern: string, workloadName: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern === workloadName;
  const head = pattern.slice(0, star);
  const tail = pattern.slice(star + 1);
  return workloadName.length >= head.length + tail.length && workloadName.startsWith(head) && workloadName.endsWith(tail);
}

function stateRuleMatches(rule: AccessRule, kind: 'read' | 'write', path: string, mask: (m: string, p: string) => boolean): boolean {
  return rule.kind === 'state' && grants(rule.operation, kind) && rule.filterMasks.some((m) => mask(m, path));
}

const logRuleMatches = (rule: AccessRule, name: string) => rule.kind === 'log' && rule.workloadNames.some((p) => logPatternMatches(p, name));

export function isAllowed(access: ControlInterfaceAccess, request: Access): boolean {
  switch (request.kind) {
    case 'cancelLogs':
    case 'cancelEvents':
      return true;
    case 'logs':
      return request.workloadNames.every(
        (name) => access.allowRules.some((r) => logRuleMatches(r, name)) && !access.denyRules.some((r) => logRuleMatches(r, name)),
      );
    case 'read':
    case 'write': {
      const paths = request.paths.length > 0 ? request.paths : [''];
      return paths.every(
        (path) =>
          access.allowRules.some((r) => stateRuleMatches(r, request.kind, path, allowMaskMatches)) &&
          !access.denyRules.some((r) => stateRuleMatches(r, request.kind, path, denyMaskMatches)),
      );
    }
  }
}
