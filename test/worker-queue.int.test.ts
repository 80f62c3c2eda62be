// The worker queue that hashing and template work run on (infra/threads/worker-queue.ts): one
// job at a time on a thread of its own, a bounded wait, and a time limit that stops a runaway
// job by replacing its thread.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkerBudgetError, WorkerQueue, WorkerQueueFullError } from '../infra/threads/worker-queue.ts';

const test = suite('worker queue');
const WORKER = new URL('./fixtures/spin-worker.ts', import.meta.url);

test('a job that runs past its time limit is stopped, its thread replaced, and the jobs behind it still run', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 4, budgetMs: 300, name: 'spinning' });
  try {
    const first = await queue.run({ spinMs: 0 });
    const runaway = queue.run({ spinMs: Infinity }).then(() => 'finished', (error) => error);
    const after = queue.run({ spinMs: 0 });
    const stopped = await runaway;
    assert.instance(stopped, WorkerBudgetError);
    assert.match(stopped.message, /^spinning took longer than 300 ms$/);
    const next = await after;
    assert.is.not(next, first, 'a new thread ran the next job');
    assert.is(queue.budgetStops, 1);
  } finally {
    await queue.close();
  }
});

test('one job runs at a time; beyond maxWaiting the next is refused at once; errors reach their own caller only', async () => {
  const queue = new WorkerQueue<{ spinMs: number; fail?: string }, number>({ workerUrl: WORKER, maxWaiting: 2, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const jobs = [queue.run({ spinMs: 200 }), queue.run({ spinMs: 0, fail: 'this one' }), queue.run({ spinMs: 0 }), queue.run({ spinMs: 0 })];
    const outcomes = await Promise.all(jobs.map((job) => job.then((id) => `ran on ${id}`, (error) => (error instanceof WorkerQueueFullError ? 'refused' : `failed: ${error.message}`))));
    assert.equal(outcomes.map((o) => o.replace(/\d+$/, 'N')), ['ran on N', 'failed: this one', 'ran on N', 'refused']);
    assert.is(queue.pending, 0);
  } finally {
    await queue.close();
  }
});

test('the time limit starts once the thread has loaded: a new thread\'s start-up is not counted against its first job', async () => {
  const queue = new WorkerQueue<null, string>({ workerUrl: new URL('./fixtures/slow-start-worker.ts', import.meta.url), maxWaiting: 1, budgetMs: 150, name: 'slow start' });
  try {
    assert.is(await queue.run(null), 'done', 'the job ran, though the thread took 500 ms to load under a 150 ms limit');
  } finally {
    await queue.close();
  }
});

test.run();
