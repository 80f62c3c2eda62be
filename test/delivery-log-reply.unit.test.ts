// The sender's delivery lines carry the receiving server's reply, and servers put addresses in
// their replies (Postfix: "550 5.1.1 <bob@example.org>: Recipient address rejected"), BCC
// recipients' too, while the log names the recipient's domain only (docs/operations.md, "Delivery
// in the log"). Every line that carries a reply (a recipient's outcome, a failure, an unusable
// transport) keeps the domains of its addresses and none of their local parts, has no control
// character left, and is bounded.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { deliveryOutcomeReport, REPLY_LOG_CHARS } from '../apps/services/delivery/outcome-report.ts';
import type { RecipientResultReport } from '../domain/email/delivery.ts';
import type { AdmittedMessage, DeliveryAttempted, DeliveryFailed } from '../domain/email/events.ts';

const message = { emailId: 'em_replies', occurredAt: '2026-11-28T10:00:00.000Z' } as AdmittedMessage;

function reporter() {
  const lines: Array<{ message: string; fields: Record<string, unknown> }> = [];
  const log = (message: string, fields: Record<string, unknown>) => lines.push({ message, fields });
  return { lines, report: deliveryOutcomeReport({ transport: 'smtp', warn: log, error: log, now: () => new Date() }) };
}

const attempted = (response: string, status = 'hard_bounced') => ({
  transport: 'smtp', attempt: 1, occurredAt: '2026-11-28T10:00:01.000Z', nextAttemptAt: null, failureCode: null,
  recipients: [{ index: 0, address: 'bob@example.org', status, smtpCode: 550, enhancedCode: '5.1.1', response }],
} as unknown as DeliveryAttempted['data']);

test('given a refusal that echoes the address, when it is logged, then the reply keeps the domain and not the local part', () => {
  const { lines, report } = reporter();
  report.attempted(message, attempted('550 5.1.1 <bob@example.org>: Recipient address rejected: User unknown in local recipient table'), [], () => 'example.org');
  assert.equal(lines.map((l) => [l.message, l.fields.reply]), [
    ['delivery hard_bounced', '550 5.1.1 <…@example.org>: Recipient address rejected: User unknown in local recipient table'],
  ]);
});

test('given a reply with several addresses, a quoted local part, line breaks and control characters, then none of them is in the line', () => {
  const { lines, report } = reporter();
  const reply = '550-5.1.1 <a.b+tag@example.org> unknown\r\n550-5.1.1 "john doe"@example.net, x@y@example.com;\u001b[31m\r\n550 5.1.1 see log';
  report.attempted(message, attempted(reply), [], () => 'example.org');
  const logged = String(lines[0].fields.reply);
  assert.is(logged, '550-5.1.1 <…@example.org> unknown  550-5.1.1 …@example.net, …@example.com; [31m  550 5.1.1 see log');
});

test('given a very long reply, then the line holds at most REPLY_LOG_CHARS of it, its addresses taken out before the cut', () => {
  const { lines, report } = reporter();
  const filler = 'word '.repeat(REPLY_LOG_CHARS / 5 - 2);
  report.attempted(message, attempted(`550 ${filler}${'long-local-part'.repeat(20)}@example.org more`), [], () => 'example.org');
  const logged = String(lines[0].fields.reply);
  assert.is(logged.length, REPLY_LOG_CHARS);
  assert.ok(logged.endsWith('…'), logged);
  assert.not.ok(logged.includes('long-local-part'), logged);
});

test('given a failure and an unusable transport whose texts name addresses, then their lines do not either', () => {
  const { lines, report } = reporter();
  const failure = {
    attempt: 2, failureCode: 'delivery_unknown', reason: 'connection lost after <bob@example.org> was sent',
    recipients: [{ index: 0, address: 'bob@example.org' }],
  } as unknown as DeliveryFailed['data'];
  report.failed(message, failure, 'smtp');
  const unusable: RecipientResultReport = { index: 0, result: 'deferred', smtpCode: 530, enhancedCode: '5.7.0', response: '530 5.7.0 relay@example.org must authenticate', stage: 'connection' };
  report.attempted(message, attempted('530 5.7.0 relay@example.org must authenticate', 'delayed'), [unusable], () => 'example.org');
  assert.equal(lines.map((l) => [l.message, l.fields.reply]), [
    ['delivery unknown', 'connection lost after <…@example.org> was sent'],
    ['delivery delayed', '530 5.7.0 …@example.org must authenticate'],
    ['the transport cannot be used: every email waits for a retry', '530 5.7.0 …@example.org must authenticate'],
  ]);
});

test.run();
