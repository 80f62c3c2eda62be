// A worker-thread pool whose replacement thread cannot start (its module throws at load; the
// same path as a thread the system refuses) fails the jobs waiting for it at once, refuses new
// ones, keeps trying with a back-off, serves again once a thread starts, and says so: one error
// line per streak, relay_worker_thread_start_failures_total and relay_worker_pool_start_failing.
// Real threads: the template threads' queue (infra/threads/worker-queue.ts), the compose pool and
// the report parser's pool.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createRelayMetrics } from '../apps/relay-metrics.ts';
import { threadStartReport } from '../apps/worker-thread-reports.ts';
import { ComposePool, ComposeThreadLostError, ComposeThreadStartError } from '../infra/mail/compose-pool.ts';
import { ReportParsePool, ReportParserUnavailableError } from '../infra/mail/report-parse-pool.ts';
import { WorkerBudgetError, WorkerQueue, WorkerStartError } from '../infra/threads/worker-queue.ts';
import { generateDkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { awkwardComposeInput } from './support/compose-input.ts';
import { dsn } from './support/reports.ts';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, sumOf } from './support/metrics.ts';

const FAILURE = 'RELAY_TEST_THREAD_START_FAILURE';
const test = suite('worker thread start failures');

interface Line { level: string; fields: Record<string, unknown>; message: string }

function observed(pool: string) {
  const lines: Line[] = [];
  const logger = {
    debug: (fields: object, message: string) => lines.push({ level: 'debug', fields: fields as Record<string, unknown>, message }),
    info: (fields: object, message: string) => lines.push({ level: 'info', fields: fields as Record<string, unknown>, message }),
    error: (fields: object, message: string) => lines.push({ level: 'error', fields: fields as Record<string, unknown>, message }),
  };
  const metrics = createRelayMetrics(undefined, { process: false });
  const sample = async (name: string) => sumOf(parseMetrics(await metrics.render()), name, { pool });
  return { lines, report: threadStartReport(pool, logger, metrics.workerThreads), sample, errors: () => lines.filter((l) => l.level === 'error') };
}

/** What `promise` settled to within `ms`, or 'still pending'. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | unknown | 'still pending'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still pending'>((resolve) => (timer = setTimeout(() => resolve('still pending'), ms)));
  return Promise.race([promise.then((value) => value, (error: unknown) => error), late]).finally(() => clearTimeout(timer));
}

test.after.each(() => {
  delete process.env[FAILURE];
});

test('template threads: jobs waiting for a replacement that cannot start fail at once, not at their deadline; it recovers once threads start', async () => {
  const seen = observed('template_rendering');
  const queue = new WorkerQueue<{ spinMs: number }, number>({
    workerUrl: new URL('./fixtures/start-failing-worker.ts', import.meta.url),
    maxWaiting: 8, budgetMs: 300, maxWaitMs: 30_000, name: 'template rendering', onThreadStart: seen.report,
  });
  try {
    const first = await queue.run({ spinMs: 0 });
    process.env[FAILURE] = 'template module failed to load on purpose';
    // The runaway's thread is stopped at its time limit; its replacement throws as it loads.
    const runaway = queue.run({ spinMs: Infinity }).then(() => 'finished', (error: unknown) => error);
    const behind = [queue.run({ spinMs: 0 }, { tenant: 'a' }), queue.run({ spinMs: 0 }, { tenant: 'b' })].map((job) => job.then((id) => id, (error: unknown) => error));
    assert.instance(await runaway, WorkerBudgetError);
    for (const job of behind) {
      const outcome = await within(job, 10_000);
      assert.instance(outcome, WorkerStartError, `a job behind the failed start failed at once (its deadline is 30 s), got ${String(outcome)}`);
      assert.match((outcome as Error).message, /^template rendering: no thread could start: template module failed to load on purpose; trying again$/);
    }
    // Known broken: refused without waiting.
    const refused = await within(queue.run({ spinMs: 0 }), 100);
    assert.instance(refused, WorkerStartError);

    // Visible: one error line for the streak, naming the pool and the cause; the metrics.
    assert.is(seen.errors().length, 1);
    assert.is(seen.errors()[0].fields.pool, 'template_rendering');
    assert.match(seen.errors()[0].message, /template_rendering threads cannot start: template module failed to load on purpose; until one does, sends with a template are refused \(503\)/);
    assert.is(await seen.sample('relay_worker_pool_start_failing'), 1);

    // It keeps trying (with a back-off), and the streak stays one error line.
    await waitUntil(() => queue.starts.total >= 3, 'two more starts were tried and failed');
    assert.is(seen.errors().length, 1, 'one error line per streak');
    assert.ok(await seen.sample('relay_worker_thread_start_failures_total') >= 3);

    delete process.env[FAILURE];
    await waitUntil(() => !queue.starts.failing, 'a thread started again', 40_000);
    const after = await queue.run({ spinMs: 0 });
    assert.is.not(after, first, 'a new thread ran it');
    assert.is(await seen.sample('relay_worker_pool_start_failing'), 0);
    assert.ok(seen.lines.some((l) => l.level === 'info' && /template_rendering threads start again/.test(l.message)));
  } finally {
    await queue.close();
  }
});

test('compose pool: after a thread dies, a replacement that cannot start fails the queued messages at once and refuses new ones; it recovers once threads start', async () => {
  const key = await generateDkimKeyPair();
  const input = (subject: string) => awkwardComposeInput(key, { subject });
  const seen = observed('compose');
  const pool = new ComposePool({ threads: 1, workerUrl: new URL('./fixtures/start-failing-compose-worker.ts', import.meta.url), onThreadStart: seen.report });
  try {
    await pool.compose(input('first'));
    process.env[FAILURE] = 'compose module failed to load on purpose';
    const crashed = await within(pool.compose(input('crash the thread')), 10_000);
    assert.instance(crashed, ComposeThreadLostError);
    assert.not.instance(crashed, ComposeThreadStartError, 'the thread that ran was lost; no start failed yet');
    const queued = await within(Promise.all([pool.compose(input('next 1')), pool.compose(input('next 2'))]).finally(() => {}), 10_000);
    assert.instance(queued, ComposeThreadStartError, `got ${String(queued)}`);
    assert.instance(queued, ComposeThreadLostError, 'the sender retries it as it retries a lost thread');
    assert.match((queued as Error).message, /^no compose thread could start: compose module failed to load on purpose; trying again$/);
    assert.instance(await within(pool.compose(input('refused')), 100), ComposeThreadStartError);
    assert.is(pool.liveness.state, 'recovering');

    assert.is(seen.errors().length, 1);
    assert.match(seen.errors()[0].message, /^compose threads cannot start: compose module failed to load on purpose/);
    assert.is(await seen.sample('relay_worker_pool_start_failing'), 1);
    await waitUntil(() => pool.starts.total >= 3, 'two more starts were tried and failed');
    assert.is(seen.errors().length, 1, 'one error line per streak');

    delete process.env[FAILURE];
    await waitUntil(() => !pool.starts.failing, 'a thread started again', 40_000);
    const { raw } = await pool.compose(input('after'));
    assert.ok(raw.length > 0);
    assert.is(pool.liveness.state, 'running');
    assert.is(await seen.sample('relay_worker_pool_start_failing'), 0);
  } finally {
    await pool.close();
  }
});

test('report parser: reports waiting for threads that cannot start fail at once instead of waiting for ever; one line for the pool\'s streak; it recovers once threads start', async () => {
  const seen = observed('report_parsing');
  const pool = new ReportParsePool({ threads: 2, budgetMs: 5_000, maxWaiting: 8, workerUrl: new URL('./fixtures/start-failing-report-worker.ts', import.meta.url), onThreadStart: seen.report });
  const report = Buffer.from(dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' }));
  try {
    process.env[FAILURE] = 'report parser module failed to load on purpose';
    const first = await within(Promise.all([pool.parse(report), pool.parse(report), pool.parse(report)]), 10_000);
    assert.instance(first, ReportParserUnavailableError, `got ${String(first)}`);
    assert.match((first as Error).message, /^report parsing: no thread could start: report parser module failed to load on purpose; trying again$/);
    for (let i = 0; i < 3; i++) assert.instance(await within(pool.parse(report), 10_000), ReportParserUnavailableError, 'each later report too, not left waiting: ' + String(await within(pool.parse(report), 10_000)));

    assert.is(seen.errors().length, 1, 'one error line for the pool, however many of its threads failed');
    assert.match(seen.errors()[0].message, /^report_parsing threads cannot start: report parser module failed to load on purpose; until one does, bounce and complaint reports are answered 451/);
    assert.is(await seen.sample('relay_worker_pool_start_failing'), 1);

    delete process.env[FAILURE];
    await waitUntil(async () => (await seen.sample('relay_worker_pool_start_failing')) === 0, 'the pool\'s threads started again', 40_000);
    assert.is((await pool.parse(report)).recipients[0]?.outcome, 'hard_bounced');
    assert.ok(seen.lines.some((l) => l.level === 'info' && /report_parsing threads start again/.test(l.message)));
  } finally {
    await pool.close();
  }
});

test.run();
