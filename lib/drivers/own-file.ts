// A file the agent keeps for itself in its folder (a record across restarts). The agent runs as root and the
// folder is one a workload's files live beside, so such a file is trusted only as the agent writes it: a
// regular file of the agent's user that no one else may write, of bounded size, opened without following a link
// or waiting on a FIFO. It is written to a new file made exclusively, then renamed into place.
import { closeSync, constants, fstatSync, openSync, readSync, renameSync, unlinkSync, writeSync } from 'node:fs';

/** The text of `file` when it is the agent's own (see above); undefined when there is none; throws why it is not taken. */
export function readOwnFile(file: string, maxBytes: number): string | undefined {
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

/**
 * What `parse` makes of the agent's own `file` (undefined when there is none). A file that is not the agent's, or
 * that `parse` refuses, is set aside as `<file>.set-aside` and `warn` is told why: the agent goes on without it.
 */
export function readOwnRecord<T>(file: string, maxBytes: number, parse: (text: string) => T, warn: (text: string) => void): T | undefined {
  try {
    const text = readOwnFile(file, maxBytes);
    return text === undefined ? undefined : parse(text);
  } catch (err) {
    const aside = `${file}.set-aside`;
    try {
      renameSync(file, aside);
    } catch {
      // Not even that: it is written over at the next change.
    }
    warn(`The record '${file}' is not taken (${(err as Error).message}): set aside as '${aside}'.`);
    return undefined;
  }
}

function unlinkIfThere(file: string): void {
  try {
    unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Writes `text` to `file`: to a new file made exclusively beside it (whatever was at that name, a link or a FIFO, goes, not what it points to), then renamed into place. */
export function writeOwnFile(file: string, text: string): void {
  const fresh = `${file}.new`;
  unlinkIfThere(fresh);
  const fd = openSync(fresh, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  renameSync(fresh, file);
}
