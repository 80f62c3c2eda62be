// DEFECT: a BCC recipient's address is written in clear, for good, into DeliveryAttempted when
// the server's reply quotes it, as Postfix's refusals do ("550 5.1.1 <bcc@…>: Recipient address
// rejected: User unknown …").
//
// What the catalog promises: BCC addresses are in no event, only in the sealed content
// (docs/event-status-rules.md, "Recipients and their index"; domain/email/events.ts, top: event
// data "never holds message bodies or BCC in clear"); RecipientAttemptSchema names a BCC
// recipient with `address: null`, and its `response` is "the server's reply or the local error;
// never message content". The event store keeps events forever, `relay events export` prints
// them (the key that seals BCC expires after 7 days; this does not).
//
// Where: apps/services/delivery/attempt.ts:99 (report(): `response: outcome.response.slice(0, 1000)`,
// the reply as the server wrote it) → domain/email/delivery.ts:203 (decideAttemptOutcome copies
// `r.response` into `recipients[i].response`, for a BCC recipient as for any other).
//
// Suggested fix: when the outcome is decided (decideAttemptOutcome knows a recipient is BCC:
// addressOf(state, index) is null), mask every address in a BCC recipient's `response` (as
// projections/deliverability.ts maskedReply does: "<address>"), or at least the recipient's own,
// before it is recorded; the SMTP codes stay.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REFUSING_DOMAIN, allCaughtUp, exportEvents, sendOverHttp, startCatalogFlow, waitForEmail, type CatalogFlow } from './support/catalog-flow.ts';

const test = suite<{ flow: CatalogFlow }>('a BCC recipient refused with a reply that quotes it');

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow();
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

test('no exported event holds the BCC address, not even in the recorded SMTP reply', async ({ flow }) => {
  const hidden = `hidden.person@${REFUSING_DOMAIN}`;
  const { id } = await sendOverHttp(flow, {
    from: `hello@${flow.tenant.domain}`, to: ['ann@one.example.org'], bcc: [hidden], subject: 'Your order', text: 'hi',
  });
  // The positive marker: the attempt's outcome is recorded (the visible recipient is sent).
  const shown = await waitForEmail(flow, id, (d) => d.status === 'sent', 'is sent');
  await allCaughtUp(flow);
  // The read model never had the BCC recipient's reply to show (BCC recipients are never shown).
  assert.not.match(JSON.stringify(shown), hidden, 'GET /v1/emails/{id} holds no BCC address');
  const events = await exportEvents(flow);
  const attempted = events.find((e) => e.streamId === `email-${id}` && e.type === 'DeliveryAttempted');
  assert.ok(attempted, 'the attempt was exported');
  const bcc = attempted!.data.recipients.find((r: { index: number }) => r.index === 1);
  assert.ok(bcc, 'the attempt names the BCC recipient by index');
  assert.is(bcc.address, null, 'its address field is null, as documented');
  assert.is(bcc.status, 'hard_bounced');
  assert.is(bcc.smtpCode, 550, 'the codes of the refusal are kept');
  assert.not.match(bcc.response, hidden, `recipients[1].response of DeliveryAttempted holds the BCC address: ${bcc.response}`);
  const holding = events.filter((e) => JSON.stringify(e).includes(hidden)).map((e) => `${e.type} ${e.streamId}@${e.revision}`);
  // The suppression list entry's own stream names the address by design (a bcc_recipient_event,
  // naming no email); no email event may.
  assert.equal(holding.filter((where) => !where.startsWith('RecipientSuppressed ')), [], 'no email event holds the BCC address');
});

test.run();
