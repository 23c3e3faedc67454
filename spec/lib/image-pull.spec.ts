import { expect } from 'chai';
import { imagePull, parsePodmanConfig } from '../../lib/podman/runtime-config.js';

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
});
