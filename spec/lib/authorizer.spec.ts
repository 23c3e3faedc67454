import { expect } from 'chai';
import { type Access, allowMaskMatches, denyMaskMatches, isAllowed, logPatternMatches } from '../../lib/authorizer.js';
import type { AccessRule, ControlInterfaceAccess, ReadWrite } from '../../lib/workload.js';

const state = (operation: ReadWrite, ...filterMasks: string[]): AccessRule => ({ kind: 'state', operation, filterMasks });
const logs = (...workloadNames: string[]): AccessRule => ({ kind: 'log', workloadNames });
const rules = (allowRules: AccessRule[], denyRules: AccessRule[] = []): ControlInterfaceAccess => ({ allowRules, denyRules });
const read = (...paths: string[]): Access => ({ kind: 'read', paths });
const write = (...paths: string[]): Access => ({ kind: 'write', paths });

describe('Control Interface authorization', () => {
  // swdd~agent-authorizing-rules-without-segments-never-match~1
  it('a rule without segments (an empty filter mask) matches nothing, neither to allow nor to deny', () => {
    expect(allowMaskMatches('', 'desiredState')).to.equal(false);
    expect(denyMaskMatches('', 'desiredState')).to.equal(false);
    expect(isAllowed(rules([state('Read', '')]), read('desiredState'))).to.equal(false);
    expect(isAllowed(rules([state('Read', 'desiredState')], [state('Read', '')]), read('desiredState'))).to.equal(true);
  });

  // swdd~agent-checks-request-for-authorization~1, swdd~agent-authorizing-supported-rules~1
  it('denies everything by default', () => {
    expect(isAllowed(rules([]), read('desiredState'))).to.equal(false);
    expect(isAllowed(rules([]), { kind: 'logs', workloadNames: ['a'] })).to.equal(false);
  });

  // swdd~agent-authorizing-matching-allow-rules~1, swdd~agent-authorizing-matching-rules-elements~1
  it('an allow mask matches the paths it is a prefix of, `*` matching one segment', () => {
    expect(allowMaskMatches('desiredState.workloads', 'desiredState.workloads.nginx.agent')).to.equal(true);
    expect(allowMaskMatches('desiredState.workloads.*.agent', 'desiredState.workloads.nginx.agent')).to.equal(true);
    expect(allowMaskMatches('desiredState.workloads.*.agent', 'desiredState.workloads.nginx.runtime')).to.equal(false);
    expect(allowMaskMatches('desiredState.workloads.nginx', 'desiredState.workloads'), 'longer than the path').to.equal(false);
    expect(allowMaskMatches('*.workloads.nginx', 'desiredState.workloads'), 'longer, whatever its first segment').to.equal(false);
    expect(allowMaskMatches('', 'desiredState')).to.equal(false);
  });

  // swdd~agent-authorizing-matching-deny-rules~1
  it('a deny mask matches when it and the path agree on their common length', () => {
    expect(denyMaskMatches('desiredState.workloads.secret', 'desiredState.workloads')).to.equal(true);
    expect(denyMaskMatches('desiredState.workloads.secret', 'desiredState.workloads.secret.agent')).to.equal(true);
    expect(denyMaskMatches('desiredState.workloads.secret', 'desiredState.workloads.other')).to.equal(false);
    expect(denyMaskMatches('', 'desiredState')).to.equal(false);
  });

  // swdd~agent-authorizing-request-operations~2
  it('reads and writes need a rule of that operation; RW_READ_WRITE grants both, RW_NOTHING neither', () => {
    expect(isAllowed(rules([state('Read', 'desiredState')]), read('desiredState.workloads'))).to.equal(true);
    expect(isAllowed(rules([state('Read', 'desiredState')]), write('desiredState.workloads'))).to.equal(false);
    expect(isAllowed(rules([state('Write', 'desiredState')]), write('desiredState.workloads.a'))).to.equal(true);
    expect(isAllowed(rules([state('ReadWrite', 'desiredState')]), read('desiredState'))).to.equal(true);
    expect(isAllowed(rules([state('ReadWrite', 'desiredState')]), write('desiredState'))).to.equal(true);
    expect(isAllowed(rules([state('Nothing', 'desiredState')]), read('desiredState'))).to.equal(false);
  });

  // swdd~agent-authorizing-all-elements-of-filter-mask-allowed~1, swdd~agent-authorizing-condition-element-filter-mask-allowed~1
  it('every path must be allowed and none denied', () => {
    const access = rules([state('Read', 'desiredState', 'workloadStates')], [state('Read', 'desiredState.workloads.secret')]);
    expect(isAllowed(access, read('desiredState.workloads.nginx', 'workloadStates'))).to.equal(true);
    expect(isAllowed(access, read('desiredState.workloads.nginx', 'agents'))).to.equal(false);
    expect(isAllowed(access, read('desiredState.workloads.secret.agent'))).to.equal(false);
    expect(isAllowed(access, read('desiredState.workloads')), 'reading the parent would reveal the secret').to.equal(false);
    expect(isAllowed(access, write('desiredState.workloads.nginx'))).to.equal(false);
  });

  // swdd~agent-authorizing-request-without-filter-mask~2
  it('an empty mask is allowed only by a lone `*` allow rule of its operation, and denied by any deny rule of it', () => {
    expect(isAllowed(rules([state('Read', '*')]), read())).to.equal(true);
    expect(isAllowed(rules([state('Write', '*')]), write())).to.equal(true);
    expect(isAllowed(rules([state('Write', '*')]), read()), 'a write rule does not grant a read').to.equal(false);
    expect(isAllowed(rules([state('Read', 'desiredState')]), read())).to.equal(false);
    // Naming every field the state has today is no `*`: the state may grow a field the rule does not name.
    expect(isAllowed(rules([state('Read', 'desiredState', 'workloadStates', 'agents')]), read())).to.equal(false);
    expect(isAllowed(rules([state('Read', '*.workloads')]), read()), 'a longer rule starting with `*`').to.equal(false);
    expect(isAllowed(rules([state('Read', '*')], [state('Read', '*')]), read())).to.equal(false);
    // The whole state includes what any deny rule protects.
    expect(isAllowed(rules([state('Read', '*')], [state('Read', 'desiredState.workloads.secret')]), read())).to.equal(false);
    expect(isAllowed(rules([state('Read', '*')], [state('Write', 'desiredState')]), read()), 'a deny rule of the other operation').to.equal(true);
  });

  // swdd~agent-authorizing-matching-allow-rules~1
  it('a lone `*` allow rule matches every path, whatever its length', () => {
    expect(allowMaskMatches('*', 'desiredState.workloads.nginx.agent')).to.equal(true);
    expect(allowMaskMatches('*', 'effectiveState')).to.equal(true);
    expect(isAllowed(rules([state('Read', '*')]), read('desiredState.workloads.nginx', 'effectiveState'))).to.equal(true);
  });

  // swdd~agent-authorizing-log-rules-matches-request~1, swdd~api-access-rules-logs-workload-names-convention~1
  it('log rule names are exact, `*`, or have one `*` for any run of characters', () => {
    expect(logPatternMatches('ivi_*', 'ivi_nav')).to.equal(true);
    expect(logPatternMatches('ivi_*', 'ivi_')).to.equal(true);
    expect(logPatternMatches('*_nav', 'ivi_nav')).to.equal(true);
    expect(logPatternMatches('i*v', 'iv')).to.equal(true);
    expect(logPatternMatches('i*iv', 'iv'), 'head and tail may not overlap').to.equal(false);
    expect(logPatternMatches('*', 'anything')).to.equal(true);
    expect(logPatternMatches('nav', 'nav')).to.equal(true);
    expect(logPatternMatches('nav', 'navi')).to.equal(false);
  });

  // swdd~agent-authorizing-logs-if-all-requested-workloads-allowed~1, swdd~agent-authorizing-logs-cancel-always-allowed~1
  it('a logs request needs every name allowed by some pattern of a rule and denied by none; cancel is always allowed', () => {
    const access = rules([logs('ivi_*', 'nav')], [logs('ivi_secret')]);
    expect(isAllowed(access, { kind: 'logs', workloadNames: ['nav'] }), 'every pattern of the rule is tried').to.equal(true);
    expect(isAllowed(access, { kind: 'logs', workloadNames: ['ivi_nav', 'nav'] })).to.equal(true);
    expect(isAllowed(access, { kind: 'logs', workloadNames: ['ivi_nav', 'radio'] })).to.equal(false);
    expect(isAllowed(access, { kind: 'logs', workloadNames: ['ivi_secret'] })).to.equal(false);
    expect(isAllowed(rules([]), { kind: 'cancelLogs' })).to.equal(true);
  });

  it('state rules do not grant logs and log rules do not grant state', () => {
    expect(isAllowed(rules([state('ReadWrite', '*')]), { kind: 'logs', workloadNames: ['a'] })).to.equal(false);
    expect(isAllowed(rules([logs('*')]), read('desiredState'))).to.equal(false);
  });
});
