// A bounce report about a BCC recipient whose diagnostic quotes the address late in a long reply:
// the reason the report parser made from it is cut (bounceReason keeps 299 characters and "…",
// domain/feedback/classify.ts) before anyone knows whose report it is, and an address the cut went
// through has lost its "@" ("…Recipient: <quiet.w…"), so masking alone would leave the start of
// its local part (most often the person's name) in RecipientReported.reason for good. A BCC
// recipient's address is in no event (docs/event-status-rules.md; apps/api/INTERFACE-DECISIONS.md):
// the word the cut went through goes with the masked addresses (maskAddressesInCut,
// apps/services/feedback/ingest-report.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deliverReport, dsn } from './support/reports.ts';
import { allCaughtUp, exportEvents, returnPathOf, sendOverHttp, startCatalogFlow, waitForEmail, type CatalogFlow } from './support/catalog-flow.ts';

const test = suite<{ flow: CatalogFlow }>('a bounce report about a BCC recipient, quoting it late in a long reply');

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow();
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

/** The report parser's reason keeps this many characters of the diagnostic, then "…" (domain/feedback/classify.ts MAX_REASON_LENGTH - 1). */
const REASON_KEPT = 299;

test('no part of the BCC address is left in RecipientReported when the reason\'s cut falls inside it', async ({ flow }) => {
  const hidden = 'quiet.watcher@two.example.org';
  // A filtering service's refusal: an explanation, a reference, then the recipient it refused.
  const explanation = '550 5.1.1 The mailbox you tried to reach does not exist in this organisation. The address may be misspelled, ' +
    'or the person may have left. If you think this is our error, send this notice to your postmaster (reference ';
  const tail = '). Recipient: <';
  // The local part starts 7 characters before the cut: "quiet.w" is kept, the rest is cut off.
  const reference = '8F3A2C1B44D2E907'.repeat(8).slice(0, REASON_KEPT - 7 - explanation.length - tail.length);
  assert.ok(reference.length >= 8, 'the explanation leaves room for a reference');
  const diagnostic = `${explanation}${reference}${tail}${hidden}>: Recipient address rejected`;
  assert.is(diagnostic.indexOf(hidden), REASON_KEPT - 7);

  const { id } = await sendOverHttp(flow, {
    from: `hello@${flow.tenant.domain}`, to: ['dora@one.example.org'], bcc: [hidden], subject: 'Invoice', text: 'hi',
  });
  await waitForEmail(flow, id, (d) => d.status === 'sent', 'is sent');
  await deliverReport(flow.inbound.port, returnPathOf(flow, id, hidden), dsn({ recipient: hidden, action: 'failed', status: '5.1.1', diagnostic }));
  await allCaughtUp(flow);

  const events = await exportEvents(flow);
  const reported = events.find((e) => e.streamId === `email-${id}` && e.type === 'RecipientReported');
  assert.ok(reported, 'the report was recorded and exported');
  assert.is(reported!.data.recipientIndex, 1, 'about the BCC recipient');
  assert.is(reported!.data.address, null);
  assert.ok(String(reported!.data.diagnosticCode).includes('<address>'), `the diagnostic code is masked: ${reported!.data.diagnosticCode}`);
  // The address's first characters, as long as a cut may leave them.
  const fragment = hidden.slice(0, 7);
  const holding = ['diagnosticCode', 'reason'].filter((field) => String(reported!.data[field]).includes(fragment)).map((field) => `${field}: …${String(reported!.data[field]).slice(-40)}`);
  assert.equal(holding, [], `no field of the BCC recipient's RecipientReported holds part of its address ("${fragment}")`);
});

test.run();
