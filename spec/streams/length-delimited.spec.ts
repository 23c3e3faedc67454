import { expect } from 'chai';
import { from, lastValueFrom, toArray } from 'rxjs';
import { CONTROL_API_FRAMES } from '../../lib/codec/control-api.js';
import type { Frame } from '../../lib/ports.js';
import { type DecodeCounter, decodeFrames, encodeFrame } from '../../streams/length-delimited.js';
import { ControlInterfaceClient } from '../../scripts/harness/ci-client.js';

const decode = (chunks: Uint8Array[], maxFrameBytes?: number) => lastValueFrom(from(chunks).pipe(decodeFrames({ maxFrameBytes }), toArray()));
/** Frames are texts; valid ones start with "m", resync points are "HELLO". */
const rules = { isValid: (b: Uint8Array) => b[0] === 0x6d || isHello(b), isResyncPoint: (b: Uint8Array) => isHello(b) };
const isHello = (b: Uint8Array) => Buffer.from(b).toString() === 'HELLO';
const decodeWithRules = (chunks: Uint8Array[]) => lastValueFrom(from(chunks).pipe(decodeFrames({ ...rules, maxFrameBytes: 1024 }), toArray()));
const f = (t: string) => encodeFrame(Buffer.from(t));
const bytes = (...b: number[]) => Uint8Array.from(b);
const text = (f: Frame) => (f.kind === 'frame' ? Buffer.from(f.bytes).toString() : f.kind === 'oversized' ? `oversized: ${f.size}` : `garbage: ${f.reason}`);

// swdd~agent-uses-length-delimited-protobuf-for-pipes~1
describe('length-delimited frames', () => {
  it('encodes the length as a protobuf varint before the message', () => {
    expect([...encodeFrame(bytes(1, 2, 3))]).to.deep.equal([3, 1, 2, 3]);
    const big = encodeFrame(new Uint8Array(300));
    expect([...big.subarray(0, 2)]).to.deep.equal([0xac, 0x02]);
    expect(big.length).to.equal(302);
  });

  it('reassembles frames split across chunks and splits frames joined in one chunk', async () => {
    const a = encodeFrame(Buffer.from('hello'));
    const b = encodeFrame(Buffer.from('x'.repeat(200)));
    const all = Buffer.concat([a, b]);
    const chunks = [all.subarray(0, 1), all.subarray(1, 4), all.subarray(4, 8), all.subarray(8, 9), all.subarray(9)];
    expect((await decode(chunks)).map(text)).to.deep.equal(['hello', 'x'.repeat(200)]);
    expect((await decode([all])).map(text)).to.deep.equal(['hello', 'x'.repeat(200)]);
  });

  it('reports a length prefix over the limit as garbage and resynchronises on the next resync point', async () => {
    const huge = bytes(0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3);
    expect((await decodeWithRules([huge, f('mlost'), f('HELLO'), f('mafter')])).map(text)).to.deep.equal([
      'garbage: a length prefix of 4294967295 bytes (over 67108864)',
      'HELLO',
      'mafter',
    ]);
  });

  it('passes over a frame larger than the limit as its bytes come, holding none of it, and reads on after it', async () => {
    const big = encodeFrame(Buffer.alloc(5000, 0x6d));
    const chunks = [f('mbefore'), big.subarray(0, 3), big.subarray(3, 2000), big.subarray(2000), f('mafter')];
    expect((await decodeWithRules(chunks)).map(text)).to.deep.equal(['mbefore', 'oversized: 5000', 'mafter']);
    const joined = Buffer.concat([f('mbefore'), big, f('mafter')]);
    expect((await decodeWithRules([joined])).map(text)).to.deep.equal(['mbefore', 'oversized: 5000', 'mafter']);
  });

  it('reports a varint longer than five bytes as garbage', async () => {
    expect((await decode([bytes(0x80, 0x80, 0x80, 0x80, 0x80, 0x01)]))[0]).to.deep.equal({ kind: 'garbage', reason: 'an invalid length prefix' });
  });

  it('an invalid frame is garbage; reading resumes at a resync point inside the same bytes', async () => {
    const joined = Buffer.concat([f('xjunk'), bytes(7, 1), f('HELLO'), f('mnext')]);
    expect((await decodeWithRules([joined])).map(text)).to.deep.equal(['garbage: not a valid message', 'HELLO', 'mnext']);
  });

  it('a chunk that starts with a complete resync point ends a partial frame that waits in vain', async () => {
    const stale = f('m'.repeat(500)).subarray(0, 40);
    expect((await decodeWithRules([stale, f('HELLO'), f('mok')])).map(text)).to.deep.equal(['garbage: an unfinished frame of 40 bytes', 'HELLO', 'mok']);
  });

  it('keeps a truncated frame until the rest comes', async () => {
    const f = encodeFrame(Buffer.from('complete'));
    expect((await decode([f.subarray(0, 4)])).map(text)).to.deep.equal([]);
    expect((await decode([f.subarray(0, 4), f.subarray(4)])).map(text)).to.deep.equal(['complete']);
  });

  it('after any random bytes, a Hello written in one piece is found again (fuzz)', async () => {
    for (let round = 0; round < 300; round++) {
      const chunks = Array.from({ length: 5 }, () => Uint8Array.from({ length: Math.floor(Math.random() * 64) }, () => Math.floor(Math.random() * 256)));
      const frames = await decodeWithRules([...chunks, f('HELLO')]);
      for (const frame of frames) if (frame.kind === 'frame') expect(frame.bytes.length).to.be.at.most(1024);
      expect(frames.map(text), `round ${round}`).to.include('HELLO');
    }
  });
});

describe('length-delimited frames under abuse', () => {
  const count = async (chunks: Uint8Array[]) => {
    const counter: DecodeCounter = { steps: 0 };
    const frames = await lastValueFrom(from(chunks).pipe(decodeFrames(CONTROL_API_FRAMES, counter), toArray()));
    return { steps: counter.steps, frames };
  };
  const hello = ControlInterfaceClient.frame({ ToAnkaiosEnum: { case: 'hello', value: { protocolVersion: '1.0.1' } } });
  const split = (bytes: Uint8Array, size: number) => Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size));

  it('the crafted 0x88 0x7f pattern and 4 MiB of random bytes cost work linear in the bytes, in any chunking; a Hello after them is found', async function () {
    this.timeout(20_000);
    const pattern = Buffer.alloc(256 * 1024).map((_, i) => (i % 2 === 0 ? 0x88 : 0x7f));
    const random = Uint8Array.from({ length: 4 * 1024 * 1024 }, () => Math.floor(Math.random() * 256));
    for (const [name, bytes] of [
      ['0x88 0x7f', pattern],
      ['random', random],
    ] as const) {
      for (const size of name === 'random' ? [65536, 4096] : [65536, 4096, 7]) {
        const { steps, frames } = await count([Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f), ...split(bytes, size), hello]);
        expect(steps / bytes.length, `${name} in chunks of ${size}`).to.be.below(4);
        expect(frames.at(-1)).to.deep.include({ kind: 'frame' });
      }
    }
  });

  it('a frame that waits for its rest is not joined again for every chunk: waiting bytes cost once', async () => {
    const big = encodeFrame(new Uint8Array(1024 * 1024).fill(0x41));
    const { steps, frames } = await count(split(big, 1));
    expect(frames).to.have.length(1);
    expect(steps).to.equal(big.length);
  });
});
