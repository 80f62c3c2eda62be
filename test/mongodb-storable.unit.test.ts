// The MongoDB adapter's storage encoding (infra/mongodb/storable.ts): every JSON document comes
// back from its stored form as it was written, ordinary data is stored as it is (the same
// object, so nothing is copied), and what an engine cannot hold never reaches it: no key with
// '.', a leading '$', a control character, '"' or '\', no NUL in a string, no array directly in
// an array, no lone surrogate. (That the engines take the stored forms: the document store
// contract, test/contracts/document-store.contract.ts.)
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { fromStored, storedKey, storedPath, storedScalar, storedString, toStored } from '../infra/mongodb/storable.ts';

const test = suite('mongodb storable encoding');

const E = '\uE000';

/** Whether `value` holds anything an engine refuses or alters (the list at the top of storable.ts). */
function unstorable(value: unknown, inArray = false): string | null {
  if (typeof value === 'string') return value.includes('\u0000') || !value.isWellFormed() ? `string ${JSON.stringify(value)}` : null;
  if (Array.isArray(value)) {
    if (inArray) return 'an array in an array';
    for (const element of value) {
      const problem = unstorable(element, true);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, inner] of Object.entries(value)) {
    if (/[\u0000-\u001f".\\]/.test(key) || key.startsWith('$') || !key.isWellFormed()) return `key ${JSON.stringify(key)}`;
    const problem = unstorable(inner);
    if (problem) return problem;
  }
  return null;
}

function roundTrip(label: string, doc: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(doc);
  const stored = toStored(doc);
  assert.equal(doc, copy, `${label}: the written document is left as it was`);
  assert.is(unstorable(stored), null, `${label}: stored form ${JSON.stringify(stored)}`);
  // Through JSON, as a store would hand it back: a fresh object with own properties only.
  const read = fromStored(JSON.parse(JSON.stringify(stored)) as Record<string, unknown>);
  assert.equal(read, doc, label);
  assert.is(JSON.stringify(read), JSON.stringify(doc), `${label}: same keys in the same order`);
  return stored;
}

test('ordinary documents are stored as they are, and read back without a copy', () => {
  const doc = {
    _id: 'em_1', _v: 3, projectId: 'prj_1', toAddresses: ['a@example.com', 'b@example.com'], createdAt: '2025-01-01T00:00:00.000Z',
    metadata: { order: 42, 'a$b': 'c$d', '': 'empty key', nested: { list: [{ x: 1 }, null, true, 1.5], text: 'tab\there\nline' }, mid: `x${E}y` },
    tags: [{ name: 'campaign', value: 'spring' }], empty: {}, none: [],
  };
  assert.is(toStored(doc), doc, 'the same object: nothing to encode');
  assert.is(fromStored(doc), doc, 'the same object: nothing to decode');
  for (const value of ['', 'plain', 'x\u0001y', `a${E}`, '😀', '\uffff']) assert.is(storedString(value), value, JSON.stringify(value));
  for (const key of ['', 'plain', 'a$', 'a$b', 'é', `a${E}`, '😀']) assert.is(storedKey(key), key, JSON.stringify(key));
  assert.is(storedPath('metadata.order'), 'metadata.order');
  assert.is(storedScalar(10), 10);
  assert.is(storedScalar(null), null);
  assert.is(storedScalar(true), true);
});

test('keys an engine cannot hold round-trip', () => {
  const stored = roundTrip('keys', {
    'order.id': 42, $amount: '9.99', 'a\u0000b': 1, 'tab\tkey': 2, 'quote"key': 3, 'back\\slash': 4, [`${E}lead`]: 5,
    'a.b.c': { '$in': { 'x.y': [1] } }, '.': 6, $: 7, 'lone\ud800': 8, '\udc00': 9, '$a.b\u0000': 10,
  });
  assert.equal(Object.keys(stored).filter((key) => !key.startsWith(E)), [], 'every one of them encoded');
  assert.is(storedKey('order.id'), `${E}order${E}002eid`, 'the documented form');
  assert.is(storedKey(`${E}lead`), `${E}${E}e000lead`);
});

test('strings an engine cannot hold round-trip, as values, in arrays and as _id', () => {
  roundTrip('strings', {
    _id: 'id\u0000with nul', note: 'before\u0000after', nuls: '\u0000\u0000', lead: `${E}x`, onlyE: E, lone: 'x\ud800', low: '\udc00y',
    reversed: '\udc00\ud800', pair: '😀', list: ['a\u0000', `${E}`, 'ok'], deep: { deeper: { s: '\u0000' } },
  });
  assert.is(storedString('a\u0000b'), `${E}a${E}0000b`, 'the documented form');
  assert.is(storedScalar('a\u0000b'), storedString('a\u0000b'), 'query values are encoded as stored values are');
});

test('arrays inside arrays round-trip, at any depth, empty ones too', () => {
  const stored = roundTrip('arrays', {
    route: [[52.52, 13.4], [48.14, 11.58]], deep: [[[1], []], [[[]]]], empty: [[]], mixed: [1, [2, ['x\u0000']], { k: [[3]] }],
  });
  assert.equal(stored.route, [{ [E]: [52.52, 13.4] }, { [E]: [48.14, 11.58] }], 'the documented form');
});

test('the escape character itself, and text that looks like an escape, round-trip', () => {
  roundTrip('escape', {
    [E]: 1, [`${E}${E}`]: 2, [`${E}0000`]: 3, [`x${E}002e`]: 4, s1: `${E}002e`, s2: `${E}${E}0000`, s3: `${E}zzzz`,
    wrapperLike: { [E]: [1, 2] }, wrapperLikeScalar: { [E]: 'x' }, list: [{ [E]: [1] }],
  });
});

test('__proto__, constructor and other odd keys are kept as own data', () => {
  const doc = JSON.parse('{"__proto__": {"x.y": 1}, "constructor": {"prototype": {"$a": 2}}, "a": [[{"__proto__": [[1]]}]]}') as Record<string, unknown>;
  const read = fromStored(JSON.parse(JSON.stringify(toStored(doc))) as Record<string, unknown>);
  assert.is(JSON.stringify(read), JSON.stringify(doc));
  assert.is(Object.getPrototypeOf(read), Object.prototype, 'no prototype taken from the data');
  assert.ok(Object.hasOwn(read, '__proto__'));
});

test('values that are not JSON objects are left alone', () => {
  const date = new Date(0);
  const bytes = new Uint8Array([0, 1]);
  const doc = { when: date, bytes, n: 1 };
  assert.is(toStored(doc), doc);
  const withKey = toStored({ 'a.b': date });
  assert.is(Object.values(withKey)[0], date);
});

test('field paths are encoded segment by segment', () => {
  assert.is(storedPath(`metadata.${E}x`), `metadata.${storedKey(`${E}x`)}`);
  assert.is(storedPath('a.b"c'), `a.${storedKey('b"c')}`);
});

test.run();
