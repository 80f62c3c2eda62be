// A recipient whose transaction's fate was unknown (the smarthost dropped the connection after
// the message's end: failed, delivery_unknown) and for which the receiving side then sends a
// DSN "delivered" (Relay asked for NOTIFY=SUCCESS) shows delivered: only the sender writes
// `failed`, so a report about the copy supersedes it (docs/event-status-rules.md). The email's
// failureCode still tells that the attempt's fate was unknown.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { detail, send, waitForDetail } from './support/delivery.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { startFeedbackRig, stopFeedbackRig, type FeedbackRig } from './support/feedback-rig.ts';

const test = suite<FeedbackRig & { returnPaths: Map<string, string> }>('delivery_unknown answered by a delivery notice');

test.before(async (ctx) => {
  ctx.returnPaths = new Map();
  Object.assign(ctx, await startFeedbackRig({
    onRcptTo: (address, session) => { ctx.returnPaths.set(address.address, (session.envelope.mailFrom as { address: string }).address); },
    // The message's end was read, then the connection is lost before the reply: the fate is unknown.
    onData: () => 'drop',
  }));
});

test.after(async (ctx) => {
  await stopFeedbackRig(ctx);
});

test('a DSN "delivered" for a delivery_unknown recipient shows it delivered', async (ctx) => {
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: ['maybe@example.org'], subject: 'Unknown', text: 'hi' });
  const unknown = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'failed', 'is failed');
  assert.is(unknown.failureCode, 'delivery_unknown');
  await deliverReport(ctx.inbound.port, ctx.returnPaths.get('maybe@example.org')!, dsn({ recipient: 'maybe@example.org', action: 'delivered', status: '2.0.0' }));
  const after = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.deliveredAt !== null, 'has the delivery notice applied');
  assert.ok(after.events.some((e: { type: string }) => e.type === 'email.delivered'), 'the notice is on the timeline');
  assert.is(after.recipients[0].status, 'delivered', `the receiving server said it was delivered, yet the recipient shows ${after.recipients[0].status} with deliveredAt ${after.deliveredAt}`);
  assert.is(after.status, 'delivered');
  assert.is(after.failureCode, 'delivery_unknown', 'the attempt\'s own fate stays as it was recorded');
  assert.is((await detail(ctx.t, ctx.tenant.key, id)).status, 'delivered');
});

test.run();
