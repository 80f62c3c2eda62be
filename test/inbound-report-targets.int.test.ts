// Which recipient a report arriving at a return path is about, through the real feedback SMTP
// server: the return path is signed and names one recipient of one email, so a report whose
// own naming of the recipient is a guess (a feedback loop that redacted Original-Rcpt-To, the
// returned copy's To header shared by every recipient) or another form of the same recipient
// (a DSN for a forwarded address: Final-Recipient the alias, Original-Recipient the address
// sent to) is still recorded for it. And a client gone while its RCPT was being looked up
// leaves nothing behind in the server.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { emailStreamId } from '../domain/email/events.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { startInboundFixture, type InboundFixture } from './support/inbound.ts';
import { deliverReport } from './support/reports.ts';
import { SmtpSession } from './support/smtp-session.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('report targets');
const CRLF = '\r\n';

const reported = async (fx: InboundFixture, id: string) =>
  (await fx.t.stores.events.readStream(emailStreamId(id))).filter((e) => e.type === 'RecipientReported')
    .map((e) => e.data as { recipientIndex: number; outcome: string });

test('a complaint whose recipient was redacted, at the second recipient\'s return path, is that recipient\'s', async () => {
  const fx = await startInboundFixture();
  try {
    const { id, returnPaths } = await fx.email(['ann@example.org', 'bob@example.org']);
    const raw = [
      'From: <feedback@isp.example.org>', 'To: <fbl@relay.test>', 'Subject: complaint', 'Message-ID: <arf-redacted@isp.example.org>',
      'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=feedback-report; boundary="b"', '',
      '--b', 'Content-Type: text/plain', '', 'This is an abuse report.', '',
      '--b', 'Content-Type: message/feedback-report', '',
      'Feedback-Type: abuse', 'User-Agent: SomeFBL/1.0', 'Version: 1', 'Original-Rcpt-To: redacted', '',
      '--b', 'Content-Type: message/rfc822', '',
      'From: <hello@example.test>', 'To: ann@example.org, bob@example.org', 'Subject: Feedback', `Message-ID: <${id}@example.test>`, '', 'hi', '',
      '--b--', '',
    ].join(CRLF);
    await deliverReport(fx.inbound.port, returnPaths[1], raw);
    const found = await reported(fx, id);
    assert.equal(found.map((f) => [f.recipientIndex, f.outcome]), [[1, 'complained']]);
  } finally {
    await fx.close();
  }
});

test('a hard bounce for a forwarded recipient (Original-Recipient the address sent to) is recorded', async () => {
  const fx = await startInboundFixture();
  try {
    const { id, returnPaths } = await fx.email(['ann@example.org']);
    const raw = [
      'From: Mail Delivery System <MAILER-DAEMON@mx.example.org>', 'To: <bounces@relay.test>', 'Subject: Undelivered Mail Returned to Sender',
      'Message-ID: <dsn-alias@mx.example.org>', 'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b"', '',
      '--b', 'Content-Type: text/plain', '', '<ann.smith@forward.example.net> (expanded from <ann@example.org>): user unknown', '',
      '--b', 'Content-Type: message/delivery-status', '',
      'Reporting-MTA: dns; mx.example.org', '',
      'Final-Recipient: rfc822; ann.smith@forward.example.net', 'Original-Recipient: rfc822;ann@example.org',
      'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1 user unknown', '',
      '--b--', '',
    ].join(CRLF);
    await deliverReport(fx.inbound.port, returnPaths[0], raw);
    const found = await reported(fx, id);
    assert.equal(found.map((f) => [f.recipientIndex, f.outcome]), [[0, 'hard_bounced']]);
  } finally {
    await fx.close();
  }
});

test('connections closed while their RCPT is looked up leave no session state in the server', async () => {
  let lookups = 0;
  let answered = 0;
  // A store that takes 100 ms a read, as a networked one may.
  const slow = (real: EventStore): EventStore => new Proxy(real, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'readStream') return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        lookups++;
        await new Promise((resolve) => setTimeout(resolve, 100));
        try {
          return await (value as (...a: unknown[]) => unknown).apply(target, args);
        } finally {
          answered++;
        }
      };
    },
  });
  const fx = await startInboundFixture({ events: slow });
  try {
    for (let i = 0; i < 5; i++) {
      // An email of its own each time: an email looked up before is not read again.
      const { returnPaths } = await fx.email(['ann@example.org']);
      const { session } = await SmtpSession.open(fx.inbound.port);
      await session.command('EHLO client.example.org');
      assert.is((await session.command('MAIL FROM:<>')).code, 250);
      const before = lookups;
      session.write(`RCPT TO:<${returnPaths[0]}>`);
      await waitUntil(() => lookups > before, 'the RCPT is being looked up', 5_000);
      session.socket.destroy();
    }
    await waitUntil(() => answered === lookups, 'every lookup answered', 5_000);
    // What the server does with an answer runs a few turns after the read.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.is(fx.inbound.sessionsHeld(), 0, 'session state left behind');
  } finally {
    await fx.close();
  }
});

test.run();
