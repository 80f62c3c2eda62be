// Pins that failure codes follow each recipient's own result and show only for visible ones
// (INTERFACE-DECISIONS: rejected → `provider_rejected`; BCC outcomes never show, "not in the
// email's status or `failureCode`"): a To recipient refused by the smarthost and a BCC one whose
// connection drops after the dot (unknown) give the email, its email.rejected entry and the
// webhook-shared reason `provider_rejected`, never the BCC recipient's `delivery_unknown`.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { outcomesOf } from '../domain/email/outcomes.ts';
import { upcastEmailEvent } from '../domain/email/upcast.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

let sink: SmtpSink;
let t: TestApp;
let tenant: DeliveryTenant;

test.before(async () => {
  sink = await startSmtpSink({
    onData: (_raw, session) => {
      const to = session.envelope.rcptTo[0]?.address;
      if (to === 'carol@example.org') return { error: smtpError(554, '5.7.1 Message refused') };
      if (to === 'hidden@example.net') return 'drop';
      return {};
    },
  });
  t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`, RELAY_DELIVERY_RETRY_SCALE: '0.001' }, { processors: true });
  tenant = await deliveryTenant(t);
});

test.after(async () => {
  await t.close();
  await sink.close();
});

test('a rejected To recipient shows provider_rejected, not the BCC recipient\'s delivery_unknown', async () => {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'carol@example.org', bcc: 'hidden@example.net', subject: 'Refused', text: 'hi' });
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'rejected', 'is rejected');
  // The BCC recipient's fate (unknown) is recorded on the stream: make sure the attempt is complete.
  const stream = await t.stores.events.readStream(`email-${id}`);
  const attempted = stream.find((e) => e.type === 'DeliveryAttempted') as any;
  assert.equal(attempted.data.recipients.map((r: any) => r.status), ['rejected', 'failed'], 'To rejected, BCC unknown (failed)');
  const rejected = final.events.find((e: any) => e.type === 'email.rejected');
  assert.is(rejected.payload.failureCode, 'provider_rejected', 'the rejected entry\'s failure code');
  assert.is(final.failureCode, 'provider_rejected', 'the email\'s failureCode comes from its visible recipient, not the BCC one');
  // The webhook's reason is its group's (domain/webhooks/events.ts): the failure code first.
  const group = outcomesOf(upcastEmailEvent(attempted)).groups.find((g) => g.status === 'rejected')!;
  assert.match(group.reason ?? '', /^provider_rejected; 554/, 'the email.rejected webhook\'s reason');
});

test.run();
