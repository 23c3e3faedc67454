// Which conmon processes the sweep of lost containers takes as the agent's (lib/runtimes/podman/lost-creates.ts):
// the rules on a conmon's argv, once the driver has given only processes of the agent's own user running the
// conmon Podman is configured with.
import { expect } from 'chai';
import { type PodmanSetup, lostContainers, parseSetup } from '../../lib/runtimes/podman/lost-creates.js';

const SETUP: PodmanSetup = { conmon: '/usr/bin/conmon', ociRuntime: '/usr/bin/runc', graphRoot: '/var/lib/containers/storage' };
const ID = 'a'.repeat(64);
const OTHER_ID = 'b'.repeat(64);
const KEY = 'db.4f2c.agent_A';

/** A conmon's argv as Podman starts it (the parts the sweep reads). */
const conmon = (id: string, name: string, bundle = `${SETUP.graphRoot}/overlay-containers/${id}/userdata`, runtime = '/usr/bin/runc') => [
  '/usr/bin/conmon',
  '--api-version',
  '1',
  '-c',
  id,
  '-u',
  id,
  '-r',
  runtime,
  '-b',
  bundle,
  '-n',
  name,
];

describe('the sweep of containers a cut call left outside Podman', () => {
  // rx~lost-container-sweep~1
  it("finds the conmon of a container the create's name gave that Podman does not list, and nothing of what it lists", () => {
    const conmons = [
      { pid: 10, argv: conmon(ID, KEY) },
      { pid: 11, argv: conmon(OTHER_ID, KEY) },
    ];
    expect(lostContainers({ name: KEY }, new Set([OTHER_ID]), SETUP, conmons)).to.deep.equal([{ conmonPid: 10, id: ID }]);
    expect(lostContainers({ id: ID }, new Set(), SETUP, conmons)).to.deep.equal([{ conmonPid: 10, id: ID }]);
  });

  // rx~lost-container-sweep~1
  it("takes no container of another storage, though its conmon names the instance: its bundle is outside Podman's graph root", () => {
    const conmons = [
      { pid: 20, argv: conmon(ID, KEY, `/srv/other-storage/vfs-containers/${ID}/userdata`) },
      { pid: 21, argv: conmon(ID, KEY, `${SETUP.graphRoot}/overlay-containers/${OTHER_ID}/userdata`) },
      { pid: 22, argv: conmon(ID, KEY, `${SETUP.graphRoot}/../escape/overlay-containers/${ID}/userdata`) },
      { pid: 23, argv: conmon(ID, KEY, `${SETUP.graphRoot}-other/overlay-containers/${ID}/userdata`) },
    ];
    expect(lostContainers({ name: KEY }, new Set(), SETUP, conmons)).to.deep.equal([]);
  });

  // rx~lost-container-sweep~1
  it('reads no runtime from a process: what it finds carries only the pid and the id, and is removed by the configured runtime', () => {
    const found = lostContainers({ name: KEY }, new Set(), SETUP, [{ pid: 30, argv: conmon(ID, KEY, undefined, '/home/user/evil.sh') }]);
    expect(found).to.deep.equal([{ conmonPid: 30, id: ID }]);
  });

  // rx~lost-container-sweep~1
  it('takes no conmon whose id is not a container id, whose name is another, or whose flags are missing', () => {
    const conmons = [
      { pid: 40, argv: conmon('../../etc', KEY) },
      { pid: 41, argv: conmon(ID.toUpperCase(), KEY) },
      { pid: 42, argv: conmon(ID, `${KEY}x`) },
      { pid: 43, argv: ['/usr/bin/conmon', '-n', KEY] },
      { pid: 44, argv: conmon(ID, KEY).slice(0, -1) },
    ];
    expect(lostContainers({ name: KEY }, new Set(), SETUP, conmons)).to.deep.equal([]);
  });

  // rx~lost-container-sweep~1
  it('reads the conmon, the OCI runtime and the graph root from `podman info`, and nothing from an answer that lacks one or names a relative path', () => {
    const info = (conmonPath: unknown, runtime: unknown, graphRoot: unknown) =>
      JSON.stringify({ host: { conmon: { path: conmonPath }, ociRuntime: { name: 'runc', path: runtime } }, store: { graphRoot } });
    expect(parseSetup(info('/usr/bin/conmon', '/usr/bin/runc', '/var/lib/containers/storage/'))).to.deep.equal(SETUP);
    expect(parseSetup(info('conmon', '/usr/bin/runc', '/var/lib/containers/storage'))).to.equal(undefined);
    expect(parseSetup(info('/usr/bin/conmon', undefined, '/var/lib/containers/storage'))).to.equal(undefined);
    expect(parseSetup(info('/usr/bin/conmon', '/usr/bin/runc', 7))).to.equal(undefined);
    expect(parseSetup('not json')).to.equal(undefined);
  });
});
