// mocha's spec reporter, closing with the line CI reads: `N passed, N failed, N skipped`.
const Mocha = require('mocha');

const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      process.stdout.write(`\n${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SummaryReporter;
