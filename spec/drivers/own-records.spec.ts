// The records the agent keeps across restarts (lib/drivers/own-file.ts: the images it pulled, the systemd
// units it manages) against what a workload could put in their place, on real files: each is taken only as the
// agent writes it, and written without following a link.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { MAX_RECORD_BYTES, ImageRecord } from '../../lib/runtimes/containers/image-record.js';
import { unitRecord } from '../../lib/runtimes/systemd/runtime.js';
import { specFolder } from '../../scripts/harness/temp.js';

const entry = { engine: 'podman', storage: [], image: 'reg.example/app:1', id: 'a'.repeat(64) };

describe('the image record, as found on disk', () => {
  let folder = '';
  let file = '';
  let warned: string[] = [];
  const open = () => new ImageRecord(folder, 'podman', (text) => warned.push(text));
  beforeEach(() => {
    folder = specFolder('ank-record-');
    file = path.join(folder, 'images.podman.json');
    warned = [];
  });
  afterEach(() => rmSync(folder, { recursive: true, force: true }));

  /** A record as the agent writes it, holding `entry`. */
  const written = () => {
    open().add(entry, 1);
    return readFileSync(file, 'utf8');
  };

  // rx~image-gc~1
  it('reads back what it wrote, a file of its own user that only it may write', () => {
    written();
    expect((lstatSync(file).mode & 0o777).toString(8)).to.equal('600');
    expect(
      open()
        .of('podman')
        .map((r) => r.image),
    ).to.deep.equal([entry.image]);
    expect(warned).to.deep.equal([]);
  });

  /** What a workload could leave in the record's place, from the record the agent wrote (`text`). */
  const refusals: Array<[string, (text: string) => void, RegExp]> = [
    [
      'a FIFO (read without waiting for a writer)',
      () => {
        rmSync(file);
        execFileSync('mkfifo', [file]);
      },
      /not a regular file/,
    ],
    [
      'a link to a record',
      (text) => {
        writeFileSync(path.join(folder, 'elsewhere.json'), text, { mode: 0o600 });
        rmSync(file);
        symlinkSync(path.join(folder, 'elsewhere.json'), file);
      },
      /a link/,
    ],
    ['a record of another user', () => chownSync(file, 4242, 4242), /belongs to user 4242/],
    ['a record others may write', () => chmodSync(file, 0o666), /others may write it/],
    ['a record over the bound', () => truncateSync(file, MAX_RECORD_BYTES + 1), /over/],
  ];
  for (const [what, replace, why] of refusals) {
    // rx~image-gc~1
    it(`sets ${what} aside with a warning, and knows no image as its own`, () => {
      replace(written());
      expect(open().of('podman')).to.deep.equal([]);
      expect(warned).to.have.length(1);
      expect(warned[0]).to.match(why).and.include('set aside').and.include('No image is known');
      expect(existsSync(`${file}.set-aside`)).to.equal(true);
      expect(existsSync(file), 'nothing left in its place').to.equal(false);
    });
  }

  // rx~image-gc~1
  it('writes a new file in place of a link at its temporary name, leaving the link’s target as it was', () => {
    const target = path.join(folder, 'victim');
    writeFileSync(target, 'keep me');
    symlinkSync(target, `${file}.new`);
    open().add(entry, 1);
    expect(readFileSync(target, 'utf8')).to.equal('keep me');
    expect(lstatSync(file).isFile()).to.equal(true);
    expect(JSON.parse(readFileSync(file, 'utf8')).images).to.have.length(1);
  });

  // rx~systemd-runtime~1
  it('the systemd units’ record is held to the same rules: a FIFO in its place is set aside, not waited on', () => {
    const units = path.join(folder, 'systemd-units.json');
    execFileSync('mkfifo', [units]);
    const record = unitRecord(folder, (text) => warned.push(text));
    expect(record?.all()).to.deep.equal([]);
    expect(warned[0]).to.include('not a regular file').and.include('set aside');
    expect(lstatSync(`${units}.set-aside`).isFIFO()).to.equal(true);
  });
});
