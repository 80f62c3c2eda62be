// The report parser's threads (infra/mail/report-parse-pool.ts): the same answer as parseReport,
// a report over its time budget refused and its thread replaced, reports beyond the waiting
// room refused at once. The hanging thread is the real one with a report it never finishes
// (test/fixtures/hanging-report-worker.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ReportOverBudgetError, ReportParsePool, ReportParserBusyError } from '../infra/mail/report-parse-pool.ts';
import { parseReport } from '../infra/mail/report-parser.ts';
import { waitUntil } from './support/eventually.ts';
import { arf, dsn } from './support/reports.ts';

const test = suite('report parse pool');
const HANGING = new URL('./fixtures/hanging-report-worker.ts', import.meta.url);
const bytes = (text: string) => Buffer.from(text);

test('a thread gives what parseReport gives', async () => {
  const pool = new ReportParsePool({ threads: 2, budgetMs: 5_000, maxWaiting: 8 });
  try {
    for (const raw of [dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' }), arf({ recipient: 'bob@example.org' }), 'garbage\r\n\r\n\u0000']) {
      assert.equal(await pool.parse(bytes(raw)), await parseReport(raw));
    }
  } finally {
    await pool.close();
  }
});

test('over its budget a report is refused and its thread stopped; the report waiting behind it is parsed on a new one; one more than the waiting room is refused at once', async () => {
  const pool = new ReportParsePool({ threads: 1, budgetMs: 500, maxWaiting: 1, workerUrl: HANGING });
  try {
    const stuck = pool.parse(bytes(`X-Test-Hang: forever\r\n\r\nspin`)).then(() => null, (error: unknown) => error);
    await waitUntil(() => pool.waiting === 0, 'the stuck report has started on its thread');
    const behind = pool.parse(bytes(dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' })));
    assert.is(pool.waiting, 1);
    const refused = await pool.parse(bytes('one too many')).then(() => null, (error: unknown) => error);
    assert.instance(refused, ReportParserBusyError);
    assert.instance(await stuck, ReportOverBudgetError);
    assert.is((await behind).recipients[0]?.outcome, 'hard_bounced');
  } finally {
    await pool.close();
  }
});

test.run();
