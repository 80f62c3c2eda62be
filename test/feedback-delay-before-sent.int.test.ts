// The smarthost accepts ann's copy (250) at once, while bob's transaction in the same attempt
// still waits for its reply. The smarthost's downstream then sends a DSN "delayed" for ann, which
// the feedback server records before the attempt's outcome. The DSN can only have been written
// after the 250, so the attempt's `sent`, recorded later, does not undo it: ann shows `delayed`,
// as she would had the two been recorded the other way round (docs/event-status-rules.md:
// reported first), and she is not sent again.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { send, waitForDetail } from './support/delivery.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { smtpError, type DataAnswer } from './support/smtp-sink.ts';
import { startFeedbackRig, stopFeedbackRig, type FeedbackRig } from './support/feedback-rig.ts';

interface Context extends FeedbackRig {
  returnPaths: Map<string, string>;
  /** The answer to the next DATA for an address, held back until the test settles it. */
  held: Map<string, Deferred<DataAnswer>>;
  accepted: Set<string>;
}

const test = suite<Context>('a reported delay recorded before the attempt\'s own outcome');

test.before(async (ctx) => {
  ctx.returnPaths = new Map();
  ctx.accepted = new Set();
  ctx.held = new Map();
  // Retries within a second; a begun transaction may still wait 12 s for its reply.
  Object.assign(ctx, await startFeedbackRig({
    onRcptTo: (address, session) => { ctx.returnPaths.set(address.address, (session.envelope.mailFrom as { address: string }).address); },
    onData: (_raw, session) => {
      const to = session.envelope.rcptTo[0].address;
      const held = ctx.held.get(to);
      ctx.held.delete(to);
      return held?.promise ?? { after: () => ctx.accepted.add(to) };
    },
  }, { RELAY_DELIVERY_RETRY_SCALE: '0.01' }));
});

test.after(async (ctx) => {
  for (const held of ctx.held.values()) held.resolve({});
  await stopFeedbackRig(ctx);
});

/** Sends to `first` and `second`, holding the smarthost's answer for `second`; returns once `first`'s copy was accepted and reported delayed. */
async function reportedWhileAttemptOpen(ctx: Context, first: string, second: string): Promise<{ id: string; release: Deferred<DataAnswer> }> {
  const release = deferred<DataAnswer>();
  ctx.held.set(second, release);
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: [first, second], subject: 'Delay', text: 'hi' });
  await waitUntil(() => ctx.accepted.has(first), `the smarthost accepted ${first}`);
  await deliverReport(ctx.inbound.port, ctx.returnPaths.get(first)!, dsn({ recipient: first, action: 'delayed', status: '4.4.7', diagnostic: 'delivery temporarily suspended' }));
  await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.recipients[0].status === 'delayed', 'shows the reported delay');
  return { id, release };
}

test('a DSN "delayed" for a copy the smarthost accepted still shows once the attempt is recorded', async (ctx) => {
  const { id, release } = await reportedWhileAttemptOpen(ctx, 'ann@example.org', 'bob@example.org');
  release.resolve({});
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.recipients[1].status === 'sent', 'has the attempt recorded');
  const stream = (await ctx.t.stores.events.readStream(`email-${id}`)).map((e) => e.type);
  assert.ok(stream.indexOf('RecipientReported') < stream.indexOf('DeliveryAttempted'), 'the report was recorded first');
  assert.is(final.recipients[0].status, 'delayed', 'the smarthost\'s 250 came before the delay it reported; the delay must not be undone');
  assert.is(final.status, 'delayed');
  assert.ok(final.sentAt, 'the copy was sent');
});

test('the recipient whose delay was reported first is done: the retry for a deferred co-recipient does not send to it again', async (ctx) => {
  const { id, release } = await reportedWhileAttemptOpen(ctx, 'cy@example.org', 'dee@example.org');
  release.resolve({ error: smtpError(451, 'try again later') });
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.recipients[1].status === 'sent', 'has the retry of the deferred recipient recorded');
  assert.ok((await ctx.t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'DeliveryAttempted').length >= 2, 'a second attempt was made');
  assert.is(ctx.sink.rcptCommands.filter((a) => a.address === 'cy@example.org').length, 1, 'one transaction for cy, in the first attempt only');
  assert.is(final.recipients[0].status, 'delayed');
});

test.run();
