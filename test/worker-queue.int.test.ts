// The worker queue that hashing and template work run on (infra/threads/worker-queue.ts): one
// job at a time on a thread of its own, tenants taking turns, a bounded wait (in number, per
// tenant, and in time), and a time limit and a heap limit that stop a runaway job by replacing
// its thread.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkerBudgetError, WorkerOutOfMemoryError, WorkerQueue, WorkerQueueFullError, WorkerWaitError } from '../infra/threads/worker-queue.ts';

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
    assert.is(queue.threadGeneration, 1);
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

test('tenants take turns: a tenant\'s backlog waits behind the job of another tenant that came meanwhile, not in front of it', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 10, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const order: string[] = [];
    const job = (tenant: string, spinMs: number, label: string) => queue.run({ spinMs }, { tenant }).then(() => order.push(label));
    const jobs = [job('a', 100, 'a1'), job('a', 10, 'a2'), job('a', 10, 'a3'), job('b', 10, 'b1'), job('a', 10, 'a4'), job('c', 10, 'c1'), job('b', 10, 'b2')];
    await Promise.all(jobs);
    assert.equal(order, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
  } finally {
    await queue.close();
  }
});

test('beyond maxWaitingPerTenant a tenant\'s next job is refused at once; another tenant\'s is not', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 10, maxWaitingPerTenant: 2, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const outcome = (job: Promise<number>) => job.then(() => 'ran', (error) => (error instanceof WorkerQueueFullError ? 'refused' : `failed: ${error.message}`));
    const jobs = [
      queue.run({ spinMs: 100 }, { tenant: 'a' }), queue.run({ spinMs: 0 }, { tenant: 'a' }), queue.run({ spinMs: 0 }, { tenant: 'a' }),
      queue.run({ spinMs: 0 }, { tenant: 'a' }), queue.run({ spinMs: 0 }, { tenant: 'b' }), queue.run({ spinMs: 0 }, { tenant: 'b' }),
    ];
    assert.equal(await Promise.all(jobs.map(outcome)), ['ran', 'ran', 'ran', 'refused', 'ran', 'ran']);
  } finally {
    await queue.close();
  }
});

test('a job still waiting after maxWaitMs is refused (WorkerWaitError, a WorkerQueueFullError) without ever being made or run', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 4, maxWaitMs: 100, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    let runningDone = false;
    const running = queue.run({ spinMs: 600 }).then((id) => ((runningDone = true), id));
    let made = 0;
    const late = await queue.runPrepared(() => (made++, { spinMs: 0 }), { tenant: 'b' }).then(() => 'ran', (error) => error);
    assert.instance(late, WorkerWaitError);
    assert.instance(late, WorkerQueueFullError);
    assert.match(late.message, /^spinning: waited 100 ms without starting$/);
    assert.not.ok(runningDone, 'refused while the job in front of it was still running');
    await running;
    assert.is(made, 0, 'never made, so never run');
    assert.is(queue.waitExpiries, 1);
    assert.is(queue.pending, 0);
  } finally {
    await queue.close();
  }
});

test('a job that takes its thread past maxHeapMb fails with WorkerOutOfMemoryError; the thread is replaced and the next job runs', async () => {
  const queue = new WorkerQueue<{ spinMs: number; allocate?: boolean }, number>({ workerUrl: WORKER, maxWaiting: 2, maxHeapMb: 16, name: 'allocating' });
  try {
    const first = await queue.run({ spinMs: 0 });
    const outcome = await queue.run({ spinMs: 0, allocate: true }).then(() => 'finished', (error) => error);
    assert.instance(outcome, WorkerOutOfMemoryError);
    assert.match(outcome.message, /^allocating ran out of memory \(16 MB\)$/);
    assert.is(queue.memoryStops, 1);
    assert.is(queue.threadGeneration, 1);
    assert.is.not(await queue.run({ spinMs: 0 }), first, 'a new thread ran the next job');
  } finally {
    await queue.close();
  }
});

test.run();
