// domain/text.ts: the spec's "characters" are code points (as in JSON Schema), not UTF-16 units.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { characterCount, cutText, hasCharacterCountWithin } from '../domain/text.ts';

test('characterCount counts code points: an astral character is one, a lone surrogate one', () => {
  assert.is(characterCount(''), 0);
  assert.is(characterCount('abc'), 3);
  assert.is(characterCount('é'), 1);
  assert.is(characterCount('📦'), 1);
  assert.is(characterCount('a📦b📦'), 4);
  assert.is(characterCount('\ud83d'), 1, 'high surrogate alone');
  assert.is(characterCount('\ude00x'), 2, 'low surrogate alone');
  assert.is(characterCount('\ud83d\ud83d\ude00'), 2, 'a lone high surrogate, then a pair');
});

test('characterCount: a pair is a high surrogate (D800 to DBFF) followed by a low one (DC00 to DFFF), at the edges of both ranges', () => {
  for (const high of [0xd800, 0xdbff]) for (const low of [0xdc00, 0xdfff]) assert.is(characterCount(String.fromCharCode(high, low)), 1, `${high.toString(16)} ${low.toString(16)}`);
  assert.is(characterCount(String.fromCharCode(0xd7ff, 0xdc00)), 2, 'below the high range');
  assert.is(characterCount(String.fromCharCode(0xdc00, 0xdc00)), 2, 'a low surrogate does not start a pair');
  assert.is(characterCount(String.fromCharCode(0xd800, 0xdbff)), 2, 'a high one is no low one');
  assert.is(characterCount(String.fromCharCode(0xd800, 0xe000)), 2, 'above the low range');
  assert.is(characterCount('x\ud83d'), 2, 'a high surrogate at the end');
});

test('hasCharacterCountWithin agrees with characterCount at the bounds, fast path or not', () => {
  for (const [value, min, max] of [
    ['📦'.repeat(998), 1, 998], ['📦'.repeat(999), 1, 998], ['', 1, 998], ['', 0, 5], ['ab', 2, 2], ['📦', 2, 2],
    ['📦📦', 2, 2], ['📦📦x', 1, 2], ['x'.repeat(10), 0, 10], ['x'.repeat(11), 0, 10],
  ] as const) {
    const count = characterCount(value);
    assert.is(hasCharacterCountWithin(value, min, max), count >= min && count <= max, `${JSON.stringify(value.slice(0, 8))} (${count}) in ${min}..${max}`);
  }
});

test('cutText cuts to at most that many UTF-16 units, never between the halves of a pair', () => {
  assert.is(cutText('abc', 5), 'abc');
  assert.is(cutText('abcdef', 3), 'abc');
  assert.is(cutText('ab📦', 3), 'ab', 'the pair would be cut: it goes whole');
  assert.is(cutText('ab📦', 4), 'ab📦');
  assert.is(cutText('a📦b', 3), 'a📦');
  assert.is(cutText('\ude00\ude00x', 2), '\ude00\ude00', 'low surrogates alone are kept as written');
});

test.run();
