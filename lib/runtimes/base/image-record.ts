// The record of the images the agent pulled, kept across restarts in `<folder>/images.<engine>.json`. The agent
// runs as root and the folder is one a workload's files live beside, so the file is trusted only as the agent
// writes it: a regular file of the agent's user that no one else may write, of bounded size, opened without
// following a link; anything else is set aside with a warning (nothing is then known to be the agent's, so
// nothing is removed). It is written to a new file made exclusively, then renamed into place.
import { closeSync, constants, fstatSync, openSync, readSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

/** How many images the record holds at most (the oldest are forgotten: never removed, never wrongly). */
export const MAX_RECORDED = 10_000;
/** The largest record read: MAX_RECORDED entries of long names fit. */
export const MAX_RECORD_BYTES = 4 * 2 ** 20;

/** An image the agent pulled: the reference it pulled, and the image that reference named then. */
export interface Recorded {
  readonly engine: string;
  readonly storage: readonly string[];
  readonly image: string;
  readonly id: string;
  readonly pulledAt: number;
}

export class ImageRecord {
  private images: Recorded[] = [];
  private readonly file?: string;

  /** `warn` is told why a file found in the record's place was set aside. */
  constructor(folder: string | undefined, engine: string, warn: (text: string) => void = () => undefined) {
    this.file = folder && path.join(folder, `images.${engine}.json`);
    if (!this.file) return;
    try {
      const text = readOwnFile(this.file);
      const read = text === undefined ? {} : (JSON.parse(text) as { images?: unknown });
      this.images = (Array.isArray(read.images) ? read.images : []).filter(isRecorded).slice(-MAX_RECORDED);
    } catch (err) {
      const aside = `${this.file}.set-aside`;
      try {
        renameSync(this.file, aside);
      } catch {
        // Not even that: it is written over at the next change.
      }
      warn(`The image record '${this.file}' is not taken (${(err as Error).message}): set aside as '${aside}'; no image is known to be the agent's.`);
    }
  }

  add(image: Omit<Recorded, 'pulledAt'>, at: number): void {
    this.images = [...this.images.filter((r) => !same(r, image)), { ...image, pulledAt: at }].slice(-MAX_RECORDED);
    this.save();
  }

  delete(image: Pick<Recorded, 'engine' | 'storage' | 'image'>): void {
    this.images = this.images.filter((r) => !same(r, image));
    this.save();
  }

  of(engine: string): readonly Recorded[] {
    return this.images.filter((r) => r.engine === engine);
  }

  private save(): void {
    if (!this.file) return;
    const fresh = `${this.file}.new`;
    try {
      // Whatever is at the new file's name (a link, a FIFO) goes, not what it points to: the new file is made exclusively.
      unlinkIfThere(fresh);
      const fd = openSync(fresh, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        writeSync(fd, JSON.stringify({ images: this.images }));
      } finally {
        closeSync(fd);
      }
      renameSync(fresh, this.file);
    } catch {
      // A full disk: the record is written again at its next change.
    }
  }
}

/** The text of `file` when it is the agent's own (see above); undefined when there is none; throws why it is not taken. */
export function readOwnFile(file: string, maxBytes = MAX_RECORD_BYTES): string | undefined {
  let fd: number;
  try {
    // Non-blocking: a FIFO in the file's place would hold the open until someone writes it.
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new Error(code === 'ELOOP' ? 'it is a link' : (err as Error).message);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new Error('it is not a regular file');
    if (stat.uid !== process.getuid?.()) throw new Error(`it belongs to user ${stat.uid}`);
    if (stat.mode & 0o022) throw new Error(`others may write it (mode ${(stat.mode & 0o777).toString(8)})`);
    if (stat.size > maxBytes) throw new Error(`it has ${stat.size} bytes, over ${maxBytes}`);
    const bytes = Buffer.alloc(stat.size);
    let read = 0;
    for (let n = 1; n > 0 && read < bytes.length; read += n) n = readSync(fd, bytes, read, bytes.length - read, read);
    return bytes.toString('utf8', 0, read);
  } finally {
    closeSync(fd);
  }
}

function unlinkIfThere(file: string): void {
  try {
    unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

const same = (r: Recorded, other: Pick<Recorded, 'engine' | 'storage' | 'image'>) =>
  r.engine === other.engine && r.image === other.image && r.storage.join('\0') === other.storage.join('\0');

function isRecorded(value: unknown): value is Recorded {
  const r = value as Recorded;
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof r.engine === 'string' &&
    typeof r.image === 'string' &&
    typeof r.id === 'string' &&
    r.id !== '' &&
    typeof r.pulledAt === 'number' &&
    Array.isArray(r.storage) &&
    r.storage.every((s) => typeof s === 'string')
  );
}
