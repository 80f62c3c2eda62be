// A bounce report's Status field reaches the stats API only as an enhanced status code: the
// report parser keeps the code alone ("5.1.1"; a comment or other words after it are not the
// status), and the deliverability read model takes only a code from an event's status, so that
// events recorded before that (holding the field as the report wrote it, up to 2,000
// characters) show no address or words where stats promise SMTP codes
// (recipient_domains[].top_reply.code). Driven through the real report parser, the report's
// findings as ingest-report.ts records them, the deliverability projection and the stats summary.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { statsSum } from '../apps/services/deliverability-stats.ts';
import { parseReport } from '../infra/mail/report-parser.ts';
import { applyToDeliverability, type DeliverabilityEmail } from '../projections/deliverability.ts';
import { TO, accepted, after, attempted, claimed, outcome, recorded } from './support/email-events.ts';
import { dsn } from './support/reports.ts';

const test = suite('report status in the deliverability stats');

const HOSTILE_STATUS = '5.1.1 (forwarded to carol.private@corp.example, call +1 555 0100)';

const reported = (found: { outcome: string; status: string | null; diagnosticCode: string | null; reason: string }, format: string) => ({
  type: 'RecipientReported',
  data: {
    reportId: 'r1', recipientIndex: 0, address: TO, outcome: found.outcome, format, status: found.status,
    diagnosticCode: found.diagnosticCode, reason: found.reason.slice(0, 1000), complaintType: null, occurredAt: after(60_000),
  },
});

function topReply(report: ReturnType<typeof reported>) {
  const events = recorded([accepted(), claimed(), attempted([outcome(0, 'sent'), outcome(1, 'sent')]), report]);
  const doc = events.reduce<DeliverabilityEmail | null>(applyToDeliverability, null)!;
  const sum = statsSum({ projectId: 'prj_1', from: new Date('2026-11-01T00:00:00Z'), to: new Date('2026-11-02T00:00:00Z'), granularity: 'day', groupBy: null });
  sum.add(doc);
  return sum.result().recipient_domains[0].top_reply!;
}

test('the parser keeps the status code alone; the failure reply code shows no address the report wrote into its Status field', async () => {
  const parsed = await parseReport(dsn({
    recipient: TO, action: 'failed', status: HOSTILE_STATUS,
    diagnostic: '550 5.1.1 <ann@example.test>: Recipient address rejected',
  }));
  const [found] = parsed.recipients;
  assert.is(found.outcome, 'hard_bounced');
  assert.is(found.status, '5.1.1');
  const reply = topReply(reported(found, parsed.kind));
  assert.not.match(reply.text, /@/, 'the words are masked');
  assert.not.match(reply.code, /@/, `the code is ${JSON.stringify(reply.code)}`);
  assert.is(reply.code, '5.1.1');
});

test('a Status field that is no code gives no status', async () => {
  const parsed = await parseReport(dsn({ recipient: TO, action: 'failed', status: 'call carol.private@corp.example', diagnostic: '550 5.1.1 unknown user' }));
  assert.is(parsed.recipients[0].status, null);
});

test('an event already stored with the Status field as written: only its leading code is the reply code, words are never a code', () => {
  const stored = (status: string | null) => topReply(reported({ outcome: 'hard_bounced', status, diagnosticCode: '550 5.1.1 unknown', reason: 'unknown' }, 'dsn'));
  assert.is(stored(HOSTILE_STATUS).code, '5.1.1');
  assert.is(stored('carol.private@corp.example').code, '');
  assert.is(stored('5.1.1.7 @corp.example').code, '');
});

test('reply words with a quoted or an apostrophe address are masked whole', () => {
  const reply = topReply(reported({ outcome: 'hard_bounced', status: '5.1.1', diagnosticCode: `550 5.1.1 "john doe"@example.org and o'brien@example.org: no such user`, reason: 'x' }, 'dsn'));
  assert.is(reply.text, '550 5.1.1 <address> and <address>: no such user');
});

test.run();
