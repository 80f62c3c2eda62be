// A complaint (RFC 5965 ARF) that came back to a recipient's signed return path is that
// recipient's whatever its Original-Rcpt-To says, through the real feedback SMTP server. Feedback
// loops that redact the recipient (Validity's Universal FBL for Rackspace, Comcast, ...) put a
// placeholder or a hashed address there, and RFC 6449 tells the sender to identify the
// complainer by its own identifiers: here the return path. A forwarded copy's complaint names
// the mailbox it reached; the return path still names the copy Relay sent, and the address the
// report named is kept in the recorded reason.
import { readFileSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { emailStreamId } from '../domain/email/events.ts';
import { startInboundFixture } from './support/inbound.ts';
import { arf, deliverReport } from './support/reports.ts';

const test = suite('complaint with a redacted Original-Rcpt-To');

test('the Rackspace/Validity FBL sample of the bounce corpus (Original-Rcpt-To: hashed@example.com) at a return path is a complaint of that recipient', async () => {
  const fx = await startInboundFixture();
  try {
    const { id, returnPaths } = await fx.email(['ann@example.org']);
    const raw = readFileSync(new URL('./fixtures/bounces/emails/arf-25.eml', import.meta.url), 'latin1');
    // Resolves on the server's 250, which it sends once the report has been recorded.
    await deliverReport(fx.inbound.port, returnPaths[0], raw);
    const events = await fx.t.stores.events.readStream(emailStreamId(id));
    const reports = events.filter((e) => e.type === 'RecipientReported' || e.type === 'RecipientReportRepeated');
    assert.equal(reports.map((e) => [e.type, (e.data as { outcome: string }).outcome]), [['RecipientReported', 'complained']],
      'the complaint that came back to ann\'s signed return path was dropped because the FBL hashed Original-Rcpt-To');
  } finally {
    await fx.close();
  }
});

test('a forwarded copy\'s complaint naming the mailbox it reached, at the second recipient\'s return path, is that recipient\'s, the named address in its reason', async () => {
  const fx = await startInboundFixture();
  try {
    const { id, returnPaths } = await fx.email(['ann@example.org', 'bob@example.org']);
    await deliverReport(fx.inbound.port, returnPaths[1], arf({ recipient: 'bob.smith@forward.example.net' }));
    const events = await fx.t.stores.events.readStream(emailStreamId(id));
    const reports = events.filter((e) => e.type === 'RecipientReported' || e.type === 'RecipientReportRepeated')
      .map((e) => e.data as { recipientIndex: number; outcome: string; reason: string });
    assert.equal(reports.map((r) => [r.recipientIndex, r.outcome]), [[1, 'complained']]);
    assert.match(reports[0].reason, /bob\.smith@forward\.example\.net/);
  } finally {
    await fx.close();
  }
});

test.run();
