// The worker queue that hashing and template work run on (infra/threads/worker-queue.ts): one
// job at a time on a thread of its own, tenants taking turns by the thread time they use, a bounded wait (in number, per
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

test('a replacement thread\'s start-up does not count against the jobs waiting for it: none is handed to it, or refused for waiting, until it has loaded', async () => {
  // Each thread takes 500 ms to load; a job may wait 400 ms.
  const queue = new WorkerQueue<{ spinMs?: number } | null, string>({ workerUrl: new URL('./fixtures/slow-start-worker.ts', import.meta.url), maxWaiting: 4, maxWaitMs: 400, budgetMs: 100, name: 'slow start' });
  try {
    assert.is(await queue.run(null), 'done');
    const outcome = (job: Promise<string>) => job.then((answer) => answer, (error) => (error instanceof WorkerBudgetError ? 'stopped' : error instanceof WorkerWaitError ? 'refused' : `failed: ${error.message}`));
    const runaway = outcome(queue.run({ spinMs: Infinity }, { tenant: 'a' }));
    const behind = [outcome(queue.run(null, { tenant: 'b' })), outcome(queue.run(null, { tenant: 'b' })), outcome(queue.run(null, { tenant: 'c' }))];
    assert.is(await runaway, 'stopped');
    // They waited about 100 ms for the runaway and 500 ms for its thread's replacement.
    assert.equal(await Promise.all(behind), ['done', 'done', 'done']);
    assert.is(queue.waitExpiries, 0);
  } finally {
    await queue.close();
  }
});

test('tenants take turns by the thread time they use: a tenant\'s backlog waits behind the job of another tenant that came meanwhile, and one that just held the thread long waits while others\' short jobs run', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 10, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const order: string[] = [];
    const job = (tenant: string, spinMs: number, label: string) => queue.run({ spinMs }, { tenant }).then(() => order.push(label));
    // a1 holds the thread for 200 ms; b and c have used 10 ms each when b2's turn comes, so b2
    // runs before a2; a's jobs then run in their order.
    const jobs = [job('a', 200, 'a1'), job('a', 10, 'a2'), job('a', 10, 'a3'), job('b', 10, 'b1'), job('a', 10, 'a4'), job('c', 10, 'c1'), job('b', 10, 'b2')];
    await Promise.all(jobs);
    assert.equal(order, ['a1', 'b1', 'c1', 'b2', 'a2', 'a3', 'a4']);
  } finally {
    await queue.close();
  }
});

test('tenants whose jobs cost the same alternate one job each, in the order their turn came up', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 10, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const order: string[] = [];
    const job = (tenant: string, label: string) => queue.run({ spinMs: 60 }, { tenant }).then(() => order.push(label));
    await Promise.all([job('a', 'a1'), job('a', 'a2'), job('a', 'a3'), job('b', 'b1'), job('b', 'b2'), job('b', 'b3')]);
    // Equal spins measure a little apart: after a1 and b1 either may be a millisecond ahead, so
    // only the alternation is asserted: neither runs two jobs while the other waits with less used.
    assert.is(order[0], 'a1');
    assert.is(order[1], 'b1');
    for (let i = 2; i < order.length; i += 2) assert.equal(order.slice(i, i + 2).map((label) => label[0]).sort(), ['a', 'b'], order.join(','));
  } finally {
    await queue.close();
  }
});

test('a tenant that comes back after idling starts at the queue\'s virtual time: it banks no credit for the time it was away', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 20, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const order: string[] = [];
    const job = (tenant: string, label: string) => queue.run({ spinMs: 50 }, { tenant }).then(() => order.push(label));
    let bJobs: Array<Promise<number>> = [];
    // b comes once a has used 100 ms alone (a3 is running then: it was started before a2's caller heard back).
    const aJobs = [job('a', 'a1'), job('a', 'a2').then((n) => ((bJobs = [job('b', 'b1'), job('b', 'b2'), job('b', 'b3'), job('b', 'b4')]), n)), job('a', 'a3'), job('a', 'a4'), job('a', 'a5')];
    await Promise.all(aJobs);
    await Promise.all(bJobs);
    assert.equal(order.slice(0, 3), ['a1', 'a2', 'a3']);
    // Had b started from zero, it would have run b1, b2 and b3 (150 ms) before a4 (a at 150 ms).
    assert.ok(order.indexOf('a4') < order.indexOf('b3'), order.join(','));
    assert.ok(order.indexOf('b1') < order.indexOf('a4'), `b's first job runs first: it arrived with nothing used: ${order.join(',')}`);
  } finally {
    await queue.close();
  }
});

test('a job that runs its thread to the time limit charges its tenant for the limit and the new thread\'s start-up: another tenant\'s backlog runs before its next job', async () => {
  const queue = new WorkerQueue<{ spinMs: number }, number>({ workerUrl: WORKER, maxWaiting: 40, maxWaitMs: 1000, budgetMs: 150, name: 'spinning' });
  try {
    await queue.run({ spinMs: 0 });
    const order: string[] = [];
    const outcome = (label: string, spinMs: number, tenant: string) => queue.run({ spinMs }, { tenant }).then(
      () => order.push(label),
      (error) => order.push(`${label} ${error instanceof WorkerBudgetError ? 'stopped' : error instanceof WorkerWaitError ? 'refused' : error.message}`),
    );
    const heavy = Array.from({ length: 3 }, (_, i) => outcome(`h${i + 1}`, Infinity, 'heavy'));
    const quick = Array.from({ length: 20 }, (_, i) => outcome(`q${i + 1}`, 1, 'quick'));
    await Promise.all([...heavy, ...quick]);
    // h1 runs first (the thread was free); then all 20 quick jobs (about 20 ms) before h2, though
    // each tenant took turns one job each before; none refused while h1's thread was replaced.
    assert.equal(order, ['h1 stopped', ...Array.from({ length: 20 }, (_, i) => `q${i + 1}`), 'h2 stopped', 'h3 stopped']);
    assert.is(queue.budgetStops, 3);
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
