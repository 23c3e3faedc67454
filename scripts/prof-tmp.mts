import { FakeAnkaiosServer } from './harness/fake-server.js';
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, mkdirSync } from 'node:fs';
rmSync('/tmp/prof', { recursive: true, force: true });
mkdirSync('/tmp/prof');
const server = await FakeAnkaiosServer.start();
const t = performance.now();
const child = spawn(
  process.execPath,
  [
    '--max-semi-space-size=1',
    '--cpu-prof',
    '--cpu-prof-dir=/tmp/prof',
    '--cpu-prof-interval=100',
    'bin/ank-agent.js',
    '-n',
    'prof_a',
    '-s',
    server.url,
    '-k',
    '-r',
    '/tmp/profrun',
  ],
  { stdio: ['ignore', 'pipe', 'pipe'] },
);
let firstLine = 0;
child.stdout.once('data', () => (firstLine = performance.now() - t));
child.stderr.once('data', () => (firstLine ||= performance.now() - t));
await (await server.nextStream()).waitFor(() => true);
const hello = performance.now() - t;
console.log('first line', firstLine.toFixed(0), 'hello', hello.toFixed(0));
child.kill('SIGINT');
await new Promise((r) => child.on('exit', r));
const file = readdirSync('/tmp/prof')[0];
const prof = JSON.parse(readFileSync(`/tmp/prof/${file}`, 'utf8'));
// self time by function+url, only samples before the hello
const byId = new Map(prof.nodes.map((n: any) => [n.id, n]));
const self = new Map<string, number>();
let time = prof.startTime;
const helloAbs = prof.startTime + hello * 1000;
for (let i = 0; i < prof.samples.length; i++) {
  time += prof.timeDeltas[i];
  if (time > helloAbs) break;
  const n: any = byId.get(prof.samples[i]);
  const key = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`;
  self.set(key, (self.get(key) ?? 0) + prof.timeDeltas[i] / 1000);
}
console.log(
  [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25)
    .map(([k, v]) => `${v.toFixed(1)} ms ${k}`)
    .join('\n'),
);
server.stop();
process.exit(0);
