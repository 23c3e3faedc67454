import { expect } from 'chai';
import { EMPTY } from 'rxjs';
import { PodmanCli } from '../../lib/runtimes/podman/cli.js';
import { PodmanRuntime } from '../../lib/runtimes/podman/runtime.js';
import { imagePull, parsePodmanConfig } from '../../lib/runtimes/podman/runtime-config.js';
import { workload } from '../../scripts/harness/fixtures.js';

const pullOf = (options: string[], general: string[] = []) =>
  imagePull(parsePodmanConfig(`image: reg.example:5000/app:2\ngeneralOptions: ${JSON.stringify(general)}\ncommandOptions: ${JSON.stringify(options)}`));

// rx~pull-ahead-registry~1
describe("an image pulled ahead (the workload's registry options and --pull policy)", () => {
  it('takes the run options that say how to reach or choose the image, in both spellings, and leaves the others', () => {
    const pull = pullOf(
      [
        '--tls-verify=false',
        '--authfile',
        '/etc/auth.json',
        '--creds=u:p',
        '--cert-dir',
        '/certs',
        '--platform',
        'linux/arm64',
        '--arch=arm64',
        '--os',
        'linux',
        '--variant',
        'v8',
        '--network=host',
        '-p',
        '80:80',
      ],
      ['--root', '/var/lib/other'],
    );
    expect(pull.args).to.deep.equal([
      '--root',
      '/var/lib/other',
      'pull',
      '--quiet',
      '--tls-verify=false',
      '--authfile=/etc/auth.json',
      '--creds=u:p',
      '--cert-dir=/certs',
      '--platform=linux/arm64',
      '--arch=arm64',
      '--os=linux',
      '--variant=v8',
      'reg.example:5000/app:2',
    ]);
    expect(pull.policy).to.equal('missing');
  });

  it('follows --pull: with never nothing is pulled ahead; always and newer pull each time; missing only when the image is not there', () => {
    expect(pullOf(['--pull=never']).policy).to.equal('never');
    expect(pullOf(['--pull', 'always']).policy).to.equal('always');
    expect(pullOf(['--pull=newer']).policy).to.equal('always');
    expect(pullOf(['--pull=missing']).policy).to.equal('missing');
    expect(pullOf([]).policy).to.equal('missing');
  });

  it('a flag at the end without its value is passed on as given, for Podman to refuse as the run would', () => {
    expect(pullOf(['--creds']).args).to.include('--creds=');
  });

  it('an update to the image its current instance runs, from the same storage, has nothing to fetch (no podman call)', () => {
    const runtime = new PodmanRuntime(new PodmanCli({ binary: '/nonexistent/podman' }), () => EMPTY);
    const at = (config: string) => ({ ...workload('web', { config }), runtime: 'podman' });
    const current = at('image: app:1\ncommandOptions: ["-e", "A=1"]');
    expect(runtime.fetchImage(at('image: app:1\ncommandOptions: ["-e", "A=2"]'), current)).to.equal(undefined);
    expect(runtime.fetchImage(at('image: app:2'), current)).not.to.equal(undefined);
    expect(runtime.fetchImage(at('image: app:1\ncommandOptions: ["--pull=always"]'), current)).not.to.equal(undefined);
    expect(runtime.fetchImage(at('image: app:1\ngeneralOptions: ["--root", "/other"]'), current)).not.to.equal(undefined);
    expect(runtime.fetchImage(at('image: app:1\ncommandOptions: ["--pull=never"]'))).to.equal(undefined);
  });
});
