// A recipient the smarthost deferred (delayed, a retry scheduled) that a report then makes final
// (a bounce to its return path) leaves nobody to send to: the report ends the delivery. When the
// retry that was scheduled falls due, the sender drops the email's work item instead of running
// its step again, and never spins on it (a step run over and over without yielding would freeze
// the thread, the API on it included).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

let sink: SmtpSink;
let t: TestApp;
let inbound: InboundServer;
let tenant: DeliveryTenant;

test.before(async () => {
  sink = await startSmtpSink({
    onRcptTo: (address) => (address.address === 'bob@example.org' ? smtpError(451, '4.3.0 Try again later') : undefined),
  });
  // Real retry times (first retry 30 s after the attempt): the test moves the shared clock past it.
  t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none` }, { processors: true });
  inbound = await startTestInbound(t, () => t.clock.now());
  tenant = await deliveryTenant(t);
});

test.after(async () => {
  await inbound.stop();
  await t.close();
  await sink.close();
});

test('a deferred recipient that a bounce report makes final ends the delivery: its work item goes and the sender stops running it', async () => {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'bob@example.org', subject: 'Deferred then bounced', text: 'hi' });
  await waitForDetail(t, tenant.key, id, (d) => d.recipients[0]?.status === 'delayed', 'bob delayed');
  const returnPath = sink.mailFromCommands.find((a) => a.address.includes(id.toLowerCase()) || a.address.startsWith('rr-'))?.address;
  assert.ok(returnPath, 'the deferred transaction showed its return path in MAIL FROM');
  // Whoever saw that MAIL FROM bounces the message for good.
  await deliverReport(inbound.port, returnPath!, dsn({ recipient: 'bob@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown', envelopeId: id }));
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'hard_bounced', 'the bounce is recorded');

  // Count the sender's reads of this email's stream from now on. A sender that spins on the email
  // never yields to a timer (node:sqlite answers without I/O), so the count itself is the marker:
  // past SPIN reads the clock is put back an hour (nothing is due then) and the test sees it.
  const SPIN = 1000;
  const streamId = emailStreamId(id);
  let reads = 0;
  let spun = false;
  const events = t.stores.events as { readStream: (...args: any[]) => any };
  const readStream = events.readStream.bind(events);
  events.readStream = (stream: string, ...rest: any[]) => {
    if (stream === streamId && ++reads >= SPIN && !spun) {
      spun = true;
      t.clock.advance(-60 * 60_000);
    }
    return readStream(stream, ...rest);
  };
  try {
    // The retry that was scheduled for bob falls due.
    t.clock.advance(5 * 60_000);
    // Positive marker: the sender has looked at the email since the retry fell due.
    await waitUntil(() => reads > 0, 'the sender ran the due step');
    await waitUntil(async () => spun || (await workItems(t.stores.documents).get(id)) === null, `${id} has no work item left, or the sender spun on it`);
    const item = await workItems(t.stores.documents).get(id);
    assert.not.ok(spun, `nothing is left to send to anyone, yet the sender ran the email's step over and over without yielding: ${reads} reads of its stream after the retry fell due; work item ${JSON.stringify(item && { step: item.step, attempt: item.attempt, dueAt: item.dueAt })}`);
    assert.is(item, null, 'the delivery is over: no work item');
  } finally {
    events.readStream = readStream;
  }
});

test.run();
