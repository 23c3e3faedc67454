#!/usr/bin/env node
// A stand-in for `podman` that keeps its containers as files in $FAKE_PODMAN_DIR, so the bench can run
// an agent with hundreds of workloads in seconds. It knows what this agent and the released one ask of
// Podman: run, ps (with label and name filters), start, stop, rm, volume ls, logs and a quiet events stream.
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const dir = process.env.FAKE_PODMAN_DIR;
const args = process.argv.slice(2).filter((a, i, all) => !(all[i - 1] === '--format' || a === '--format' || a.startsWith('--format=')));
const file = (id) => path.join(dir, `${id}.json`);
/** Every container; one removed while this looks is passed over (several of these run at once). */
const all = () =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .flatMap((f) => {
      try {
        return [JSON.parse(readFileSync(path.join(dir, f), 'utf8'))];
      } catch {
        return [];
      }
    });
const find = (ref) => all().find((c) => c.Id === ref || c.Names.includes(ref));
const save = (c) => writeFileSync(file(c.Id), JSON.stringify(c));
const matches = (c, filter) => {
  const [kind, value] = [filter.slice(0, filter.indexOf('=')), filter.slice(filter.indexOf('=') + 1)];
  if (kind === 'label') {
    const [k, v] = [value.slice(0, value.indexOf('=')), value.slice(value.indexOf('=') + 1)];
    return c.Labels?.[k] === v;
  }
  if (kind === 'name') return c.Names.some((n) => new RegExp(value).test(n));
  return true;
};

const [command, ...rest] = args;
if (command !== 'events') writeFileSync(path.join(dir, '..', 'calls'), 'x', { flag: 'a' });
switch (command) {
  case 'ps': {
    // `--filter=<f>` (this agent) or `--filter <f>` (the released agent).
    const filters = rest.flatMap((a, i) => (a.startsWith('--filter=') ? [a.slice('--filter='.length)] : rest[i - 1] === '--filter' ? [a] : []));
    process.stdout.write(JSON.stringify(all().filter((c) => filters.every((f) => matches(c, f)))));
    break;
  }
  case 'run': {
    const Labels = {};
    let name;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--name') name = rest[++i];
      else if (rest[i].startsWith('--label=')) {
        const label = rest[i].slice('--label='.length);
        Labels[label.slice(0, label.indexOf('='))] = label.slice(label.indexOf('=') + 1);
      }
    }
    const Id = randomBytes(32).toString('hex');
    save({ Id, Names: [name ?? Id.slice(0, 12)], State: 'running', ExitCode: 0, Pod: '', Labels });
    process.stdout.write(`${Id}\n`);
    break;
  }
  case 'start':
  case 'stop': {
    const c = find(rest.at(-1));
    if (!c) process.exit(rest.includes('--ignore') ? 0 : 125);
    save({ ...c, State: command === 'start' ? 'running' : 'exited', ExitCode: 0 });
    break;
  }
  case 'rm': {
    const c = find(rest.at(-1));
    if (c) rmSync(file(c.Id));
    else if (!rest.includes('--force') && !rest.includes('--ignore')) process.exit(1);
    break;
  }
  case 'volume':
    process.stdout.write('[]');
    break;
  case 'events': {
    // Quiet until the one who started it is gone (an agent killed with SIGKILL): a real stream would end at its
    // next write to the closed pipe; this one never writes, so it looks. What a bench appends to the file
    // `events` beside the containers' folder is passed on as it comes (the event lines of the budgets part).
    const parent = process.ppid;
    const feed = path.join(dir, '..', 'events');
    let offset = 0;
    setInterval(() => {
      if (process.ppid !== parent) process.exit(0);
      let bytes;
      try {
        bytes = readFileSync(feed).subarray(offset);
      } catch {
        return;
      }
      offset += bytes.length;
      if (bytes.length > 0) process.stdout.write(bytes);
    }, 100);
    break;
  }
  default:
    break;
}
