// The dispatcher (apps/pipeline/dispatcher.ts) holds an item whose run failed for a short
// back-off (pollMs, doubling up to 10 s). A wall clock stepped back (NTP) while the item is held
// must not lengthen the back-off by the size of the step: a webhook delivery or a delivery step
// whose run failed once (a store hiccup) runs again after its back-off. The schedule here is in
// memory; the dispatcher is the real one (the sender's and the webhooks'). Date.now is stepped
// as the OS clock would be; the wait below is in monotonic time, which the step does not move.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startDispatcher, type DueSource } from '../apps/pipeline/dispatcher.ts';

const test = suite('dispatcher back-off after a clock step back');

const realNow = Date.now.bind(Date);
let stepMs = 0;
test.before(() => {
  Date.now = () => realNow() + stepMs;
});
test.after(() => {
  Date.now = realNow;
});

/** Waits (real, monotonic time) until `condition` holds or `ms` pass; whether it held. */
async function within(ms: number, condition: () => boolean): Promise<boolean> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return condition();
}

test('given an item whose run failed once, when the wall clock is stepped back an hour while it is held, then it runs again after its back-off (20 ms), not after the step', async () => {
  const runs: number[] = [];
  let done = false;
  const source: DueSource<{ id: string }> = {
    due: async () => (done ? [] : [{ id: 'whd_1' }]),
    id: (item) => item.id,
    key: () => 'endpoint',
    dueAt: () => 0,
    run: async () => {
      runs.push(performance.now());
      if (runs.length === 1) throw new Error('store hiccup');
      done = true;
    },
  };
  const dispatcher = startDispatcher(source, {
    concurrency: 4, perKey: () => 4, pollMs: 20, now: () => new Date(Date.now()),
    // Told once the item is held back: then NTP steps the clock back one hour.
    onError: () => {
      stepMs = -60 * 60_000;
    },
  });
  try {
    const ran = await within(2_000, () => runs.length >= 2);
    assert.ok(ran, `the failed item was not run again within 2 s (runs: ${runs.length})`);
  } finally {
    await dispatcher.stop();
  }
});

test.run();
