// The dispatcher (apps/pipeline/dispatcher.ts) tells its part of every run that throws
// (onRunFailed, which the sender and the webhooks count in relay_dispatch_run_failures_total):
// once per failed run, with the run's error, never for a run that succeeds nor for a look at
// the schedule that fails (that one shows in the part's liveness instead).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startDispatcher, type DueSource } from '../apps/pipeline/dispatcher.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('dispatcher: failed runs told to their part');

test('given an item whose run keeps throwing next to one that succeeds, and a look that fails, then each failed run is told once, with its error', async () => {
  const due = new Set(['bad', 'good']);
  const lookError = new Error('the schedule cannot be read');
  let looksToFail = 1;
  let goodRuns = 0;
  const source: DueSource<string> = {
    async due() {
      if (looksToFail-- > 0) throw lookError;
      return [...due];
    },
    id: (item) => item,
    dueAt: () => 0,
    key: (item) => item,
    async run(item) {
      if (item === 'bad') throw new Error(`run of ${item} failed`);
      goodRuns++;
      due.delete(item);
    },
  };
  const errors: Error[] = [];
  const runFailures: Error[] = [];
  const dispatcher = startDispatcher(source, {
    concurrency: 2, perKey: () => 1, pollMs: 20, now: () => new Date(),
    onError: (error) => errors.push(error),
    onRunFailed: (error) => runFailures.push(error),
  });
  try {
    await waitUntil(() => runFailures.length >= 3 && goodRuns === 1, 'the bad item failed three times and the good one ran', 5_000);
  } finally {
    await dispatcher.stop();
  }
  assert.ok(runFailures.every((error) => error.message === 'run of bad failed'), runFailures.map((e) => e.message).join(', '));
  assert.is(errors[0], lookError, 'the failed look was reported');
  assert.equal(errors.slice(1), runFailures, 'every failed run was both reported and told as a failed run, and nothing else was');
});

test.run();
