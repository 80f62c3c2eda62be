// DEFECT: a bounce report about a BCC recipient writes that recipient's address in clear, for
// good, into RecipientReported (`diagnosticCode` and `reason`), though the same event names the
// recipient with `address: null`.
//
// What the catalog promises: BCC addresses are in no event, only in the sealed content
// (docs/event-status-rules.md, "Recipients and their index"; domain/email/events.ts, top: event
// data "never holds message bodies or BCC in clear"); RecipientReportedDataSchema.address is
// "Null for a BCC recipient". A DSN's Diagnostic-Code and its human part quote the address they
// are about as a rule (Postfix: "<bcc@…>: Recipient address rejected: User unknown"), so every
// bounce of a BCC recipient ties its address to the email for ever in `relay events export` and on
// the Kafka topic.
//
// Where: apps/services/feedback/ingest-report.ts:123-124 (recordFindings records
// `finding.diagnosticCode` and `finding.reason` as the report wrote them, whether the target is
// a visible recipient or a BCC one, whose address withBccAddresses took from the sealed content).
//
// Suggested fix: for a BCC target (its recipient index past To and CC), mask addresses in
// `diagnosticCode` and `reason` ("<address>", as projections/deliverability.ts maskedReply does)
// before the RecordReport command; `status`, `outcome` and `format` stay.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deliverReport, dsn } from './support/reports.ts';
import { allCaughtUp, exportEvents, returnPathOf, sendOverHttp, startCatalogFlow, waitForEmail, type CatalogFlow } from './support/catalog-flow.ts';

const test = suite<{ flow: CatalogFlow }>('a bounce report about a BCC recipient');

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow();
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

test('the RecipientReported of a BCC recipient holds its address nowhere', async ({ flow }) => {
  const hidden = 'quiet.watcher@two.example.org';
  const { id } = await sendOverHttp(flow, {
    from: `hello@${flow.tenant.domain}`, to: ['dora@one.example.org'], bcc: [hidden], subject: 'Invoice', text: 'hi',
  });
  await waitForEmail(flow, id, (d) => d.status === 'sent', 'is sent');
  // The receiving system bounces the BCC copy later, as Postfix writes a DSN.
  await deliverReport(flow.inbound.port, returnPathOf(flow, id, hidden), dsn({
    recipient: hidden, action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${hidden}>: Recipient address rejected: User unknown in virtual mailbox table`,
  }));
  // The feedback server records the report before it answers the DATA: it is in the store now.
  await allCaughtUp(flow);
  const events = await exportEvents(flow);
  const reported = events.find((e) => e.streamId === `email-${id}` && e.type === 'RecipientReported');
  assert.ok(reported, 'the report was recorded and exported');
  assert.is(reported!.data.recipientIndex, 1, 'about the BCC recipient');
  assert.is(reported!.data.address, null, 'named without its address, as documented');
  assert.is(reported!.data.outcome, 'hard_bounced');
  assert.is(reported!.data.status, '5.1.1', 'the status code is kept');
  const holding = ['diagnosticCode', 'reason'].filter((field) => String(reported!.data[field]).includes(hidden)).map((field) => `${field}: ${reported!.data[field]}`);
  assert.equal(holding, [], 'no field of RecipientReported holds the BCC address');
});

test.run();
