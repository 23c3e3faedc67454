import { expect } from 'chai';
import { ExecutionState, formatState, transition } from '../../lib/execution-state.js';
import { needsRestart } from '../../lib/restart-policy.js';
import { compatibleVersions } from '../../lib/version.js';

const S = ExecutionState;

describe('execution states', () => {
  // swdd~api-workload-states-supported-states~1, swdd~api-workload-state-additional-information~1
  it('every state and substate, with additional info', () => {
    expect(
      [
        S.agentDisconnected(),
        S.initial(),
        S.waitingToStart(),
        S.starting('x'),
        S.startingFailed(),
        S.running(),
        S.stopping(),
        S.waitingToStop(),
        S.stoppingRequested(),
        S.deleteFailed(),
        S.succeeded(),
        S.failed(),
        S.unknown(),
        S.lost(),
        S.notScheduled(),
        S.removed(),
      ].map(formatState),
    ).to.deep.equal([
      'AgentDisconnected',
      'Pending(Initial)',
      'Pending(WaitingToStart)',
      'Pending(Starting): x',
      'Pending(StartingFailed)',
      'Running(Ok)',
      'Stopping(Stopping)',
      'Stopping(WaitingToStop)',
      'Stopping(RequestedAtRuntime)',
      'Stopping(DeleteFailed)',
      'Succeeded(Ok)',
      'Failed(ExecFailed)',
      'Failed(Unknown)',
      'Failed(Lost)',
      'NotScheduled',
      'Removed',
    ]);
  });

  // swdd~api-workload-state-transitions~1
  describe('hysteresis', () => {
    for (const from of [S.stoppingRequested(), S.waitingToStop()]) {
      for (const to of [S.running(), S.succeeded(), S.failed("Exit code: '2'")]) {
        it(`stays ${formatState(from)} when ${formatState(to)} arrives`, () => {
          expect(transition(from, to)).to.equal(from);
        });
      }
      it(`${formatState(from)} moves on to Removed`, () => expect(transition(from, S.removed())).to.deep.equal(S.removed()));
    }
    it("other states take the incoming state, Podman's own stopping too (no stop the agent ordered)", () => {
      expect(transition(S.stopping(), S.failed("Exit code: '137'"))).to.deep.equal(S.failed("Exit code: '137'"));
      expect(transition(S.stopping(), S.succeeded())).to.deep.equal(S.succeeded());
      expect(transition(S.starting(), S.running())).to.deep.equal(S.running());
      expect(transition(S.deleteFailed(), S.running())).to.deep.equal(S.running());
      expect(transition(undefined, S.running())).to.deep.equal(S.running());
    });
  });
});

// swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
describe('restart policy table', () => {
  it('ALWAYS restarts on Succeeded(Ok) and Failed(ExecFailed), ON_FAILURE on Failed(ExecFailed), NEVER never', () => {
    expect(needsRestart('Always', S.succeeded())).to.equal(true);
    expect(needsRestart('Always', S.failed())).to.equal(true);
    expect(needsRestart('Always', S.lost())).to.equal(false);
    expect(needsRestart('Always', S.running())).to.equal(false);
    expect(needsRestart('OnFailure', S.failed())).to.equal(true);
    expect(needsRestart('OnFailure', S.succeeded())).to.equal(false);
    expect(needsRestart('Never', S.failed())).to.equal(false);
  });
});

describe('protocol versions', () => {
  it('are compatible when the majors match and, under 1.0, the minors too', () => {
    expect(compatibleVersions('0.8.0', '0.8.3')).to.equal(true);
    expect(compatibleVersions('0.8.0', 'v0.8.1')).to.equal(true);
    expect(compatibleVersions('0.8.0', '0.7.0')).to.equal(false);
    expect(compatibleVersions('1.2.0', '1.5.1')).to.equal(true);
    expect(compatibleVersions('1.2.0', '2.0.0')).to.equal(false);
    expect(compatibleVersions('0.8.0', 'garbage')).to.equal(false);
    expect(compatibleVersions('0.8.0', '')).to.equal(false);
  });
});
