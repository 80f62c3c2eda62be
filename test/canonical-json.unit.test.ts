// canonicalJson (the idempotency fingerprint's input) is iterative: no input can overflow the
// call stack, and its output is byte for byte that of the recursive definition every stored
// fingerprint was computed with (kept below as the reference).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalJson } from '../apps/services/canonical-json.ts';

/** The recursive canonicalJson as it was before it became iterative: the reference. */
function recursiveCanonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(recursiveCanonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${recursiveCanonicalJson(v)}`).join(',')}}`;
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD_STRINGS = [
  '', 'a', 'A', 'é', 'e\u0301', '\u0000', '\u001f', '"', '\\', '\n\r\t', '\u2028\u2029', '\uD800', '\uDC00x', '\u{1F600}', '\uFFFF', '\uFEFF',
  '__proto__', 'constructor', 'toString', '10', '9', '-1', '1.5', ' ', 'Z', 'z', '\u00e9t\u00e9', '\u{10FFFF}', '</script>',
];
const ODD_NUMBERS = [0, -0, 1, -1, 1.5, 0.1, 1e21, 1e-7, 5e-324, Number.MAX_SAFE_INTEGER, Number.MAX_VALUE, NaN, Infinity, -Infinity, 2 ** 53 + 2, 123456789.123456789];

function arbitrary(next: () => number, depth: number): unknown {
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)];
  const roll = next();
  if (depth <= 0 || roll < 0.45) {
    const leaf = next();
    if (leaf < 0.3) return pick(ODD_STRINGS) + (next() < 0.5 ? '' : String(Math.floor(next() * 100)));
    if (leaf < 0.55) return pick(ODD_NUMBERS);
    if (leaf < 0.65) return next() < 0.5;
    if (leaf < 0.75) return null;
    if (leaf < 0.8) return undefined;
    if (leaf < 0.83) return () => 1;
    if (leaf < 0.85) return Symbol('s');
    if (leaf < 0.87) return new Date(0);
    return pick(ODD_STRINGS);
  }
  if (roll < 0.7) {
    const length = Math.floor(next() * 6);
    const array: unknown[] = [];
    for (let i = 0; i < length; i++) array.push(arbitrary(next, depth - 1));
    if (next() < 0.1) array.length += 2; // trailing holes
    if (next() < 0.1 && array.length > 1) delete array[0]; // a hole inside
    return array;
  }
  const object: Record<string, unknown> = {};
  const size = Math.floor(next() * 7);
  for (let i = 0; i < size; i++) {
    const key = next() < 0.6 ? pick(ODD_STRINGS) : `${pick(ODD_STRINGS)}${Math.floor(next() * 1000)}`;
    Object.defineProperty(object, key, { value: arbitrary(next, depth - 1), enumerable: true, configurable: true, writable: true });
  }
  if (next() < 0.1) Object.defineProperty(object, 'hidden', { value: 1, enumerable: false });
  return object;
}

const test = suite('canonicalJson');

test('byte-identical to the recursive definition on 5,000 varied values', () => {
  for (let seed = 1; seed <= 5_000; seed++) {
    const value = arbitrary(random(seed), 6);
    assert.is(canonicalJson(value), recursiveCanonicalJson(value), `seed ${seed}`);
  }
});

test('byte-identical on send bodies as clients write them, whatever their key order', () => {
  const bodies: unknown[] = [
    { from: 'Acme <a@acme.test>', to: ['b@acme.test', 'c@acme.test'], subject: 'Hi \u{1F600}', text: 'x'.repeat(10_000), metadata: { b: 2, a: 1, nested: { z: [1, 'two', null, true], y: {} } } },
    { metadata: { b: 2, a: 1 }, text: 'x', subject: 'Order', to: 't@acme.test', from: 'f@acme.test' },
    { from: 'a@acme.test', to: 'b@acme.test', template: 'welcome', variables: { name: 'Ada', n: 1, ok: false }, headers: { 'X-A': '1' }, tags: { kind: 'w' } },
    {}, [], '', 0, null, true, 'plain', [[[[]]]], { '': { '': '' } },
  ];
  for (const body of bodies) assert.is(canonicalJson(body), recursiveCanonicalJson(body));
  assert.is(canonicalJson({ b: 1, a: 2 }), '{"a":2,"b":1}');
  assert.is(canonicalJson(undefined), 'null');
});

test('keys sort by UTF-16 code units, as before (not by code point, not by locale)', () => {
  const value = { '\u{1F600}': 1, '\uFFFF': 2, 'é': 3, Z: 4, a: 5, '10': 6, '9': 7 };
  assert.is(canonicalJson(value), recursiveCanonicalJson(value));
  assert.is(canonicalJson(value), '{"10":6,"9":7,"Z":4,"a":5,"é":3,"\u{1F600}":1,"\uFFFF":2}');
});

test('no depth overflows it: 100,000 nested arrays and objects (the recursive form threw RangeError)', () => {
  let arrays: unknown = 1;
  for (let i = 0; i < 100_000; i++) arrays = [arrays];
  assert.is(canonicalJson(arrays), `${'['.repeat(100_000)}1${']'.repeat(100_000)}`);
  let objects: unknown = 'x';
  for (let i = 0; i < 100_000; i++) objects = { a: objects, b: i };
  const out = canonicalJson(objects);
  assert.ok(out.startsWith('{"a":{"a":'));
  assert.ok(out.endsWith(',"b":99999}'));
  assert.throws(() => recursiveCanonicalJson(arrays), (e: unknown) => e instanceof RangeError);
});

test('a cycle is a TypeError, not a hang; a value shared twice is written twice', () => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = { back: cyclic };
  assert.throws(() => canonicalJson(cyclic), (e: unknown) => e instanceof TypeError);
  const shared = { x: [1] };
  const twice = { a: shared, b: shared };
  assert.is(canonicalJson(twice), '{"a":{"x":[1]},"b":{"x":[1]}}');
  assert.is(canonicalJson(twice), recursiveCanonicalJson(twice));
});

test.run();
