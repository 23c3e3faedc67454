// The images a workload runs and how each is pulled ahead of its create, as its runtime's CLI would pull it:
// an image, the policy its `--pull` asks for and the run options that concern a pull. Pure.

/** How an image is to be had before its workload is created: not at all, when it is not there, or always. */
export interface ImagePull {
  readonly policy: 'never' | 'missing' | 'always';
  readonly image: string;
  /** The CLI's general options: which storage (or containerd namespace) the image goes to. */
  readonly storage: readonly string[];
  /** The pull: the CLI's arguments, with the options that reach or choose the image. */
  readonly args: readonly string[];
  /** A query that fails with exit code 1 when the image is not there. */
  readonly present: readonly string[];
}

/** Options that say how to reach or choose an image, with whether they take a value. */
export type PullFlags = Readonly<Record<string, 'value' | 'switch'>>;

/** The pull options among `given` (as `--flag=value`) and the policy its `--pull` asks for (`missing` unless told; `newer` pulls as `always`). */
export function pullOptions(given: readonly string[], flags: PullFlags): { policy: ImagePull['policy']; options: string[] } {
  let policy: ImagePull['policy'] = 'missing';
  const options: string[] = [];
  for (let i = 0; i < given.length; i++) {
    const at = given[i].indexOf('=');
    const [flag, value] = at > 0 ? [given[i].slice(0, at), given[i].slice(at + 1)] : [given[i], undefined];
    if (flag === '--pull') {
      const asked = value ?? given[++i] ?? '';
      policy = asked === 'never' ? 'never' : asked === 'always' || asked === 'newer' ? 'always' : 'missing';
    } else if (flags[flag] === 'switch') {
      options.push(given[i]);
    } else if (flags[flag] === 'value') {
      options.push(value === undefined ? `${flag}=${given[++i] ?? ''}` : given[i]);
    }
  }
  return { policy, options };
}

/** Whether `pull` fetches nothing that `current` (what an update replaces) did not already have: the same image from the same storage. */
export const alreadyThere = (pull: ImagePull, current: readonly ImagePull[]): boolean =>
  pull.policy === 'missing' && current.some((c) => c.image === pull.image && c.storage.join('\0') === pull.storage.join('\0'));
