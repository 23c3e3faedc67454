// The record of the images the agent pulled, kept across restarts in `<folder>/images.<engine>.json`, read and
// written as the agent's own file (lib/drivers/own-file.ts); anything else in its place is set aside with a warning, and
// nothing is then known to be the agent's, so nothing is removed.
import path from 'node:path';
import { readOwnRecord, writeOwnFile } from '../../drivers/own-file.js';

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
    const read = readOwnRecord(
      this.file,
      MAX_RECORD_BYTES,
      (text) => JSON.parse(text) as { images?: unknown },
      (text) => warn(`${text} No image is known to be the agent's.`),
    );
    this.images = (Array.isArray(read?.images) ? read.images : []).filter(isRecorded).slice(-MAX_RECORDED);
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
    try {
      writeOwnFile(this.file, JSON.stringify({ images: this.images }));
    } catch {
      // A full disk: the record is written again at its next change.
    }
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
