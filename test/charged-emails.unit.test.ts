// The charged emails of a month's usage (domain/usage/charged-emails.ts): an immutable map from
// email id to recipients charged, grown without copying what it holds. Pins: a map grown stays
// as it was; counts of one id add up, the newest read first; a lookup asks O(log n) layers.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ChargedEmails } from '../domain/usage/charged-emails.ts';

const test = suite('charged emails');

test('with() leaves the map it grows from unchanged; a second charge of an id adds to its count', () => {
  const before = ChargedEmails.empty.with([{ emailId: 'a', recipients: 2 }, { emailId: 'b', recipients: 1 }]);
  const after = before.with([{ emailId: 'a', recipients: 3 }, { emailId: 'c', recipients: 0 }]);
  assert.equal([before.recipientsOf('a'), before.has('c'), before.size], [2, false, 2]);
  assert.equal([after.recipientsOf('a'), after.recipientsOf('b'), after.recipientsOf('c'), after.size], [5, 1, 0, 3]);
  assert.ok(after.has('c'), 'charged with no recipients is still charged');
  assert.is(after.recipientsOf('d'), undefined);
  assert.equal([...after].sort(), ['a', 'b', 'c']);
  assert.is(after.with([]), after);
});

test('one id charged twice in one with(): summed', () => {
  const map = ChargedEmails.empty.with([{ emailId: 'a', recipients: 2 }, { emailId: 'a', recipients: 3 }]);
  assert.equal([map.recipientsOf('a'), map.size, [...map]], [5, 1, ['a']]);
});

test('grown one charge at a time to 100,000, a lookup asks at most log2(n) + 1 layers; a count raised long after is read as raised', () => {
  let map = ChargedEmails.empty;
  const n = 100_000;
  let maxLayers = 0;
  for (let i = 0; i < n; i++) {
    map = map.with([{ emailId: `em_${i}`, recipients: 1 }]);
    if (i === n / 2) map = map.with([{ emailId: 'em_0', recipients: 4 }]);
    maxLayers = Math.max(maxLayers, map.layers);
  }
  assert.is(map.size, n);
  assert.ok(maxLayers <= Math.log2(n) + 1, `${maxLayers} layers`);
  assert.equal(new Set(map).size, n);
  assert.equal([map.recipientsOf('em_0'), map.recipientsOf(`em_${n - 1}`), map.has(`em_${n}`)], [5, 1, false]);
});

test.run();
