// The feedback server's DATA read rate (apps/inbound/read-rate.ts), on a clock the test moves:
// a burst goes at once, then each read waits its share, and idle time gives back at most a burst.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ReadRate } from '../apps/inbound/read-rate.ts';

const test = suite('inbound read rate');
const KiB = 1024;

test('given 100 KiB/s with a 50 KiB burst: 50 KiB at once, then 10 ms per KiB, whoever reads', () => {
  let now = 1_000;
  const rate = new ReadRate(100 * KiB, 50 * KiB, () => now);
  assert.is(rate.delay(25 * KiB), 0);
  assert.is(rate.delay(25 * KiB), 0);
  assert.is(rate.delay(10 * KiB), 100);
  assert.is(rate.delay(10 * KiB), 200, 'the next reader waits behind the last');
  now += 200;
  assert.is(rate.delay(1 * KiB), 10);
});

test('idle time gives back at most the burst', () => {
  let now = 0;
  const rate = new ReadRate(100 * KiB, 50 * KiB, () => now);
  rate.delay(200 * KiB);
  now += 60_000;
  assert.is(rate.delay(50 * KiB), 0);
  assert.is(rate.delay(10 * KiB), 100);
});

test.run();
