import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pooledRandomBytes } from '../infra/secrets/random-pool.ts';

const test = suite('pooled random bytes');

test('each call gets the size it asked for, across refills of the pool', () => {
  const seen = new Set<string>();
  // 4 KiB a pool: 2,000 × 15 bytes refill it several times, at offsets that do not divide it.
  for (let i = 0; i < 2000; i++) {
    const bytes = pooledRandomBytes(15);
    assert.is(bytes.length, 15);
    seen.add(bytes.toString('hex'));
  }
  assert.is(seen.size, 2000, 'no value handed out twice');
  assert.is(pooledRandomBytes(64).length, 64);
  assert.is(pooledRandomBytes(1000).length, 1000);
});

test('values are not zero-filled or shared: changing one leaves the next untouched', () => {
  const a = pooledRandomBytes(32);
  const b = pooledRandomBytes(32);
  assert.not.equal([...a], new Array(32).fill(0));
  a.fill(0xff);
  assert.not.equal([...b], new Array(32).fill(0xff));
  // 32 random bytes: all-zero or all-equal with probability 2^-256 (a broken slice, not chance).
  assert.ok(new Set(b).size > 4);
});

test.run();
