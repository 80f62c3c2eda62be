// The grow-only set folded states keep (domain/grow-only-set.ts): immutable, and cheap to grow.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { GrowOnlySet } from '../domain/grow-only-set.ts';

const test = suite('grow-only set');

test('given a set, when values are added, then the new set has them and the old one is unchanged', () => {
  const before = GrowOnlySet.of(['a', 'b']);
  const after = before.with(['b', 'c', 'c']);
  assert.equal([...before].sort(), ['a', 'b']);
  assert.is(before.size, 2);
  assert.not.ok(before.has('c'));
  assert.equal([...after].sort(), ['a', 'b', 'c']);
  assert.is(after.size, 3);
  assert.ok(after.has('a') && after.has('c'));
  assert.not.ok(after.has('d'));
});

test('adding nothing new gives the same set', () => {
  const set = GrowOnlySet.of(['a']);
  assert.is(set.with([]), set);
  assert.is(set.with(['a', 'a']), set);
  assert.is(GrowOnlySet.empty.size, 0);
  assert.equal([...GrowOnlySet.empty], []);
});

test('sets grown from one ancestor do not see each other\'s values', () => {
  const base = GrowOnlySet.of(Array.from({ length: 100 }, (_, i) => `v${i}`));
  const left = base.with(['left']);
  const right = base.with(['right']);
  assert.ok(left.has('left') && !left.has('right'));
  assert.ok(right.has('right') && !right.has('left'));
  assert.is(left.size, 101);
  assert.is(right.size, 101);
});

test('grown one value at a time to 100,000, a lookup asks at most log2(n) + 1 layers and every value is there once', () => {
  let set = GrowOnlySet.empty;
  const n = 100_000;
  let maxLayers = 0;
  for (let i = 0; i < n; i++) {
    set = set.with([`em_${i}`]);
    maxLayers = Math.max(maxLayers, set.layers);
  }
  assert.is(set.size, n);
  assert.ok(maxLayers <= Math.log2(n) + 1, `${maxLayers} layers`);
  const seen = new Set(set);
  assert.is(seen.size, n);
  assert.ok(set.has('em_0') && set.has(`em_${n - 1}`) && !set.has(`em_${n}`));
});

test.run();
