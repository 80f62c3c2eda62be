import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { murmur2, partitionForKey } from '../infra/sqlite/partitioner.ts';

// Expected values from Kafka's UtilsTest.testMurmur2, so keys partition as on a real broker.
test('murmur2 matches Kafka', () => {
  const cases: Array<[string, number]> = [
    ['21', -973932308],
    ['foobar', -790332482],
    ['a-little-bit-long-string', -985981536],
    ['a-little-bit-longer-string', -1486304829],
    ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
    ['abc', 479470107],
  ];
  for (const [key, expected] of cases) assert.is(murmur2(Buffer.from(key)), expected, key);
});

test('partitionForKey is stable and in range', () => {
  for (const partitions of [1, 3, 7]) {
    for (let i = 0; i < 200; i++) {
      const key = `key-${i}-é`;
      const p = partitionForKey(key, partitions);
      assert.ok(p >= 0 && p < partitions);
      assert.is(partitionForKey(key, partitions), p);
    }
  }
  const used = new Set(Array.from({ length: 100 }, (_, i) => partitionForKey(`k${i}`, 4)));
  assert.is(used.size, 4, 'keys spread over every partition');
});

test.run();
