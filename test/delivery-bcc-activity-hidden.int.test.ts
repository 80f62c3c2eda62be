// Pins: a BCC recipient's delivery activity does not show through to the customer
// (INTERFACE-DECISIONS: BCC outcomes never show).
//  1. retries claimed for a deferred BCC recipient alone add no `email.processing` timeline
//     entry to an email whose visible recipients were all sent (a claim adds an entry only when
//     it moves a To/CC recipient to processing);
//  2. when only the BCC recipient's transaction is accepted, its queue id is not the email's
//     providerMessageId (EmailDetail, webhooks' provider_message_id): it stays null.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

let sink: SmtpSink;
let t: TestApp;
let tenant: DeliveryTenant;
let queued = 0;

test.before(async () => {
  sink = await startSmtpSink({
    onRcptTo: (address) => (address.address.startsWith('deferred') ? smtpError(451, '4.3.0 Try again later') : undefined),
    onData: () => ({ reply: `2.0.0 Ok: queued as QID${++queued}` }),
  });
  t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`, RELAY_DELIVERY_RETRY_SCALE: '0.001' }, { processors: true });
  tenant = await deliveryTenant(t);
});

test.after(async () => {
  await t.close();
  await sink.close();
});

const claims = async (id: string) => (await t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'DeliveryClaimed').length;

test('retries of a deferred BCC recipient add no timeline entries to an email whose visible recipients are sent', async () => {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'ann@example.org', bcc: 'deferred-hidden@example.net', subject: 'Hidden retries', text: 'hi' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'ann is sent');
  await waitUntil(async () => (await claims(id)) >= 3, 'the BCC recipient is retried twice');
  await processorsCaughtUp(t, ['projector']);
  const shown = await detail(t, tenant.key, id);
  assert.is(shown.status, 'sent');
  assert.equal(shown.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.sent'],
    'the timeline shows attempts made for the BCC recipient alone');
});

test('a BCC recipient\'s queue id is not the email\'s providerMessageId while no visible recipient was sent', async () => {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'deferred-ann@example.org', bcc: 'hidden@example.net', subject: 'Hidden queue id', text: 'hi' });
  const shown = await waitForDetail(t, tenant.key, id, (d) => d.status === 'delayed', 'ann is delayed');
  await waitUntil(() => sink.messages.some((m) => m.raw.toString().includes(`<${id}@`)), 'the BCC copy was accepted');
  assert.is(shown.sentAt, null);
  assert.is((await detail(t, tenant.key, id)).providerMessageId, null, 'the BCC transaction\'s queue id shows');
});

test.run();
