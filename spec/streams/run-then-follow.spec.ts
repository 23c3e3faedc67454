import { runThenFollow } from '../../streams/run-then-follow.js';
import { testScheduler } from '../helpers/virtual-time.js';

// swdd~agent-create-workload~2, swdd~agent-resume-workload~2
describe('runThenFollow: each command to its end, then follow until the next', () => {
  it('follows after a run and stops following the moment the next command arrives', () => {
    testScheduler().run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const commands = hot<'a' | 'b'>('-a------b---', { a: 'a', b: 'b' });
      const runs = { a: cold('--x|'), b: cold('-y|') };
      const follow = cold('-f-f-f-f-f-f');
      expectObservable(
        runThenFollow(
          (c: 'a' | 'b') => runs[c],
          () => follow,
        )(commands),
        '^-------------!',
      ).toBe('---x-f-f-y-f-f');
      expectSubscriptions(runs.a.subscriptions).toBe('-^--!');
      expectSubscriptions(runs.b.subscriptions).toBe('--------^-!');
      // the first follow ends when b arrives (frame 8), the second starts when b's run ended
      expectSubscriptions(follow.subscriptions).toBe(['----^---!', '----------^---!']);
    });
  });

  it('lets a command that comes during a run wait for it, and starts no follow in between', () => {
    testScheduler().run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const commands = hot<'a' | 'b'>('-ab---', { a: 'a', b: 'b' });
      const runs = { a: cold('---x|'), b: cold('y|') };
      const follow = cold('-f----');
      expectObservable(
        runThenFollow(
          (c: 'a' | 'b') => runs[c],
          () => follow,
        )(commands),
        '^-------!',
      ).toBe('----xy-f');
      expectSubscriptions(runs.a.subscriptions).toBe('-^---!');
      expectSubscriptions(runs.b.subscriptions).toBe('-----^!');
      expectSubscriptions(follow.subscriptions).toBe('------^-!');
    });
  });
});
