// An address listed twice (To and CC) gets one SMTP transaction, signed with the first listing's
// return path. A report about that one copy (a DSN's hard bounce, a feedback loop's complaint)
// moves every listing it was sent for, as the attempt's outcome did: GET /v1/emails/{id} never
// shows the same mailbox bounced in To and still sent in CC.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { send, waitForDetail } from './support/delivery.ts';
import { arf, deliverReport, dsn } from './support/reports.ts';
import { startFeedbackRig, stopFeedbackRig, type FeedbackRig } from './support/feedback-rig.ts';

const test = suite<FeedbackRig>('a report about an address listed twice');

test.before(async (ctx) => {
  Object.assign(ctx, await startFeedbackRig());
});

test.after(async (ctx) => {
  await stopFeedbackRig(ctx);
});

/** Sends to `address` in To and CC; returns the email id and the return path of its one copy. */
async function sentTwice(ctx: FeedbackRig, address: string): Promise<{ id: string; returnPath: string }> {
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: [address], cc: [address], subject: 'Dup', text: 'hi' });
  await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent');
  const copies = ctx.sink.messages.filter((m) => m.raw.toString().includes(`<${id}@`));
  assert.is(copies.length, 1, 'one transaction carried both listings');
  return { id, returnPath: (copies[0].mailFrom as { address: string }).address };
}

/**
 * The detail once the read model has every report the stream recorded (the feedback server
 * records before it answers the report's DATA): one `type` entry per RecipientReported.
 */
async function withReportsApplied(ctx: FeedbackRig, id: string, type: string) {
  const recorded = (await ctx.t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'RecipientReported').length;
  assert.ok(recorded > 0, 'the report was recorded');
  return waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.events.filter((e: { type: string }) => e.type === type).length === recorded, `has its ${recorded} report(s) applied`);
}

const statuses = (detail: { recipients: Array<{ address: string; status: string }> }) => detail.recipients.map((r) => [r.address, r.status]);

test('a hard bounce of the one copy sent to an address in To and CC bounces it wherever it is listed', async (ctx) => {
  const { id, returnPath } = await sentTwice(ctx, 'dup@example.org');
  await deliverReport(ctx.inbound.port, returnPath, dsn({ recipient: 'dup@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 <dup@example.org>: User unknown' }));
  const final = await withReportsApplied(ctx, id, 'email.bounced');
  assert.equal(statuses(final), [['dup@example.org', 'hard_bounced'], ['dup@example.org', 'hard_bounced']],
    'the same mailbox, one copy, one bounce: not hard_bounced in To and still sent in CC');
  assert.is(final.status, 'hard_bounced');
});

test('a complaint about the one copy sent to an address in To and CC is a complaint wherever it is listed', async (ctx) => {
  const { id, returnPath } = await sentTwice(ctx, 'twice@example.org');
  await deliverReport(ctx.inbound.port, returnPath, arf({ recipient: 'twice@example.org' }));
  const final = await withReportsApplied(ctx, id, 'email.complained');
  assert.equal(statuses(final), [['twice@example.org', 'complained'], ['twice@example.org', 'complained']]);
});

test.run();
