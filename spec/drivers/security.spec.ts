import { expect } from 'chai';
import { pemModeProblem } from '../../lib/drivers/security.js';

// swdd~grpc-checks-given-PEM-file-for-proper-unix-file-permission~2
describe('PEM file permissions', () => {
  it('takes a key only its owner may read or write', () => {
    for (const mode of [0o600, 0o400, 0o200]) expect(pemModeProblem(0o100000 | mode, 'agent key'), mode.toString(8)).to.equal(undefined);
    for (const mode of [0o640, 0o604, 0o700, 0o644, 0o660])
      expect(pemModeProblem(0o100000 | mode, 'agent key'), mode.toString(8)).to.match(/^has permissions /);
  });

  it('takes a certificate anyone may read but only its owner write, nobody execute', () => {
    for (const mode of [0o644, 0o600, 0o444, 0o400, 0o640]) expect(pemModeProblem(mode, 'CA certificate'), mode.toString(8)).to.equal(undefined);
    for (const mode of [0o664, 0o646, 0o755, 0o700, 0o601]) expect(pemModeProblem(mode, 'agent certificate'), mode.toString(8)).to.match(/^has permissions /);
  });
});
