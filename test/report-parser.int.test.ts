// The report parser (infra/mail/report-parser.ts) on reports written the way real MTAs write
// them (Postfix and Sendmail DSNs, an RFC 5965 complaint, qmail and Exim texts), and on damaged
// or hostile input, which must never make it throw.
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_RECIPIENTS, MAX_REPORT_BYTES, parseReport, type ParsedReport } from '../infra/mail/report-parser.ts';

const CRLF = '\r\n';
const EMAIL_ID = 'em_AAAAAAAAAAAAAAAAAAAA';
const RETURN_PATH = 'rr-aaaaaaaaaaaaaaaaaaaaaaaa-0-bbbbbbbbbbbbbbbbbbbbbbbb@bounce.example.com';

interface Rcpt {
  address: string;
  action: string;
  status: string;
  diagnostic?: string;
  text?: string;
}

/** A Postfix bounce: notification, delivery report, returned headers (RET=HDRS). */
function postfixDsn(recipients: Rcpt[], options: { subject?: string; envid?: string | null; messageId?: string } = {}): string {
  const boundary = '4C8D31A2F4.1700000000/mx.example.org';
  return [
    `Return-Path: <>`,
    `Received: by mx.example.org (Postfix) id 4C8D31A2F4; Mon, 23 Nov 2026 10:00:00 +0000 (UTC)`,
    `Date: Mon, 23 Nov 2026 10:00:00 +0000 (UTC)`,
    `From: MAILER-DAEMON@mx.example.org (Mail Delivery System)`,
    `Subject: ${options.subject ?? 'Undelivered Mail Returned to Sender'}`,
    `To: ${RETURN_PATH}`,
    `Auto-Submitted: auto-replied`,
    `MIME-Version: 1.0`,
    `Content-Type: multipart/report; report-type=delivery-status;`,
    `\tboundary="${boundary}"`,
    `Content-Transfer-Encoding: 8bit`,
    `Message-Id: <${options.messageId ?? '20261123100000.4C8D31A2F4@mx.example.org'}>`,
    ``,
    `This is a MIME-encapsulated message.`,
    ``,
    `--${boundary}`,
    `Content-Description: Notification`,
    `Content-Type: text/plain; charset=us-ascii`,
    ``,
    `This is the mail system at host mx.example.org.`,
    ``,
    `I'm sorry to have to inform you that your message could not`,
    `be delivered to one or more recipients. It's attached below.`,
    ``,
    `                   The mail system`,
    ``,
    ...recipients.flatMap((r) => [`<${r.address}>: ${r.text ?? r.diagnostic ?? r.status}`, ``]),
    `--${boundary}`,
    `Content-Description: Delivery report`,
    `Content-Type: message/delivery-status`,
    ``,
    `Reporting-MTA: dns; mx.example.org`,
    `X-Postfix-Queue-ID: 4C8D31A2F4`,
    `X-Postfix-Sender: rfc822; ${RETURN_PATH}`,
    ...(options.envid === null ? [] : [`Original-Envelope-Id: ${options.envid ?? EMAIL_ID}`]),
    `Arrival-Date: Mon, 23 Nov 2026 09:59:58 +0000 (UTC)`,
    ``,
    ...recipients.flatMap((r) => [
      `Final-Recipient: rfc822; ${r.address}`,
      `Original-Recipient: rfc822;${r.address}`,
      `Action: ${r.action}`,
      `Status: ${r.status}`,
      `Remote-MTA: dns; mx.example.net`,
      ...(r.diagnostic ? [`Diagnostic-Code: smtp; ${r.diagnostic.replace(/(.{60}\S*) /g, '$1\n    ')}`] : []),
      ``,
    ]),
    `--${boundary}`,
    `Content-Description: Undelivered Message Headers`,
    `Content-Type: text/rfc822-headers`,
    `Content-Transfer-Encoding: 8bit`,
    ``,
    `Return-Path: <${RETURN_PATH}>`,
    `From: Hello <hello@example.com>`,
    `To: ${recipients.map((r) => r.address).join(', ')}`,
    `Subject: Your receipt`,
    `Message-ID: <${EMAIL_ID}@example.com>`,
    ``,
    `--${boundary}--`,
    ``,
  ].join(CRLF);
}

const only = (report: ParsedReport) => {
  assert.is(report.recipients.length, 1, JSON.stringify(report.recipients));
  return report.recipients[0];
};

const dsn = suite('delivery status notifications');

dsn('given a Postfix bounce for an unknown user, when parsed, then one hard_bounced recipient with the DSN fields and ids', async () => {
  const report = await parseReport(postfixDsn([{
    address: 'Ann@Example.NET', action: 'failed', status: '5.1.1',
    diagnostic: '550 5.1.1 <ann@example.net>: Recipient address rejected: User unknown in virtual mailbox table',
  }]));
  assert.is(report.kind, 'dsn');
  assert.is(report.reportMessageId, '20261123100000.4C8D31A2F4@mx.example.org');
  assert.is(report.envelopeId, EMAIL_ID);
  assert.is(report.originalMessageId, `${EMAIL_ID}@example.com`);
  assert.is(report.complaint, null);
  const rcpt = only(report);
  assert.is(rcpt.address, 'ann@example.net');
  assert.is(rcpt.outcome, 'hard_bounced');
  assert.is(rcpt.status, '5.1.1');
  assert.is(rcpt.action, 'failed');
  assert.match(rcpt.diagnosticCode!, /^smtp; 550 5\.1\.1 <ann@example\.net>: Recipient address rejected: User unknown in virtual mailbox table$/);
  assert.is(rcpt.reason, '550 5.1.1 <ann@example.net>: Recipient address rejected: User unknown in virtual mailbox table');
});

dsn('given a bounce for a full mailbox, when parsed, then soft_bounced', async () => {
  const report = await parseReport(postfixDsn([{ address: 'bob@example.net', action: 'failed', status: '5.2.2', diagnostic: '552 5.2.2 <bob@example.net>: Mailbox full' }]));
  assert.is(only(report).outcome, 'soft_bounced');
});

dsn('given a bounce for a policy refusal, when parsed, then soft_bounced', async () => {
  const report = await parseReport(postfixDsn([{
    address: 'cy@gmail.example', action: 'failed', status: '5.7.26',
    diagnostic: '550-5.7.26 This mail has been blocked because the sender is unauthenticated. 550-5.7.26 Gmail requires all senders to authenticate with either SPF or DKIM.',
  }]));
  assert.is(only(report).outcome, 'soft_bounced');
});

dsn('given a 4.x.x failure the MTA gave up on, when parsed, then soft_bounced', async () => {
  const report = await parseReport(postfixDsn([{ address: 'dee@example.net', action: 'failed', status: '4.4.7', diagnostic: 'delivery temporarily suspended: connect to mx.example.net[192.0.2.9]:25: Connection timed out' }]));
  assert.is(only(report).outcome, 'soft_bounced');
});

dsn('given a delay warning, when parsed, then delayed', async () => {
  const report = await parseReport(postfixDsn(
    [{ address: 'eve@example.net', action: 'delayed', status: '4.4.1', diagnostic: 'connect to mx.example.net[192.0.2.9]:25: Connection refused' }],
    { subject: 'Delayed Mail (still being retried)' },
  ));
  const rcpt = only(report);
  assert.is(rcpt.outcome, 'delayed');
  assert.is(rcpt.action, 'delayed');
});

dsn('given a success notification (NOTIFY=SUCCESS), when parsed, then delivered', async () => {
  const report = await parseReport(postfixDsn(
    [{ address: 'fay@example.net', action: 'relayed', status: '2.0.0', diagnostic: '250 2.0.0 Ok: queued as 3F2A1' }],
    { subject: 'Successful Mail Delivery Report' },
  ));
  assert.is(only(report).outcome, 'delivered');
});

dsn('given one report about three recipients, when parsed, then one entry each, in order', async () => {
  const report = await parseReport(postfixDsn([
    { address: 'one@example.net', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 No such user' },
    { address: 'two@example.org', action: 'failed', status: '5.2.2', diagnostic: '552 5.2.2 Over quota' },
    { address: 'three@example.com', action: 'delayed', status: '4.7.1', diagnostic: '450 4.7.1 Greylisted, please try again later' },
  ]));
  assert.equal(report.recipients.map((r) => [r.address, r.outcome]), [
    ['one@example.net', 'hard_bounced'], ['two@example.org', 'soft_bounced'], ['three@example.com', 'delayed'],
  ]);
});

dsn('given recipient groups without the blank lines between them, when parsed, then still one entry per recipient', async () => {
  const raw = postfixDsn([
    { address: 'one@example.net', action: 'failed', status: '5.1.1' },
    { address: 'two@example.net', action: 'failed', status: '5.7.1' },
  ]).replace(/\r\n\r\nFinal-Recipient/g, '\r\nFinal-Recipient');
  const report = await parseReport(raw);
  assert.equal(report.recipients.map((r) => [r.address, r.outcome]), [['one@example.net', 'hard_bounced'], ['two@example.net', 'soft_bounced']]);
});

dsn('given a failure without a Diagnostic-Code, when the notification text says why, then the text decides', async () => {
  const report = await parseReport(postfixDsn([{ address: 'gus@example.net', action: 'failed', status: '5.0.0', text: 'host mx.example.net[192.0.2.3] said: 552 Requested mail action aborted: exceeded storage allocation (in reply to RCPT TO command)' }]));
  assert.is(only(report).outcome, 'soft_bounced');
});

dsn('given a failed recipient with no status and no diagnostic anywhere, when parsed, then undetermined', async () => {
  const raw = postfixDsn([{ address: 'hal@example.net', action: 'failed', status: '' }]).replace(/<hal@example\.net>: \r\n/, '\r\n');
  assert.is(only(await parseReport(raw)).outcome, 'undetermined');
});

dsn('given a Sendmail DSN whose remote refused only after DATA, when parsed, then soft_bounced (a filter, not the address)', async () => {
  const boundary = 'r9G5FZh9018575.1381900535/smtpgw.example.org';
  const raw = [
    'From: Mail Delivery Subsystem <MAILER-DAEMON@smtpgw.example.org>',
    `To: <${RETURN_PATH}>`,
    'Subject: Returned mail: see transcript for details',
    'Message-Id: <201311230000.r9G5FZh9018575@smtpgw.example.org>',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    '',
    '   ----- The following addresses had permanent fatal errors -----',
    '<ivy@example.net>',
    '    (reason: 550 Unknown user ivy@example.net)',
    '',
    '   ----- Transcript of session follows -----',
    '... while talking to mx.example.net.:',
    '>>> DATA',
    '<<< 550 Unknown user ivy@example.net',
    '554 5.0.0 Service unavailable',
    '',
    `--${boundary}`,
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; smtpgw.example.org',
    '',
    'Final-Recipient: RFC822; ivy@example.net',
    'Action: failed',
    'Status: 5.0.0',
    'Diagnostic-Code: SMTP; 550 Unknown user ivy@example.net',
    '',
    `--${boundary}--`,
  ].join(CRLF);
  const rcpt = only(await parseReport(raw));
  assert.is(rcpt.outcome, 'soft_bounced');
  assert.is(rcpt.status, '5.0.0');
});

dsn('given a DSN forwarded as quoted text, when parsed, then its fields are still read', async () => {
  const raw = [
    'From: Someone <someone@example.org>',
    'Subject: Fwd: Returned mail: see transcript for details',
    'Content-Type: text/plain',
    '',
    '> Final-Recipient: RFC822; jo@example.com',
    '> Action: failed',
    '> Status: 5.1.1',
    '> Diagnostic-Code: SMTP; 550 5.1.1 <jo@example.com>... User unknown',
    '',
  ].join(CRLF);
  const report = await parseReport(raw);
  assert.is(report.kind, 'text');
  assert.equal(report.recipients.map((r) => [r.address, r.outcome, r.action]), [['jo@example.com', 'hard_bounced', 'failed']]);
});

dsn('given a quoted local part in Final-Recipient, when parsed, then the address is kept as written, lower-cased', async () => {
  const report = await parseReport(postfixDsn([{ address: '"Odd..Name"@Example.net', action: 'failed', status: '5.1.1' }]));
  assert.is(only(report).address, '"odd..name"@example.net');
});

dsn('given Final-Recipient with a quoted local part holding an escaped quote, when parsed, then that address, as written', async () => {
  // "a\"b"@example.org: admission accepts it, and it is its own canonical form.
  const report = await parseReport(postfixDsn([{ address: '"A\\"b"@Example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' }]));
  const rcpt = only(report);
  assert.equal([rcpt.address, rcpt.outcome], ['"a\\"b"@example.org', 'hard_bounced']);
});

dsn.run();

const arf = suite('complaints (RFC 5965)');

function arfReport(fields: string[], original = ['From: Hello <hello@example.com>', 'To: kim@example.net', `Message-ID: <${EMAIL_ID}@example.com>`, 'Subject: Your receipt', '', 'the original body']): string {
  const boundary = 'arf-boundary-1';
  return [
    'From: <staff@hotmail.example>',
    `To: <${RETURN_PATH}>`,
    'Subject: complaint about message from 192.0.2.1',
    'Message-ID: <arf.1@feedback.hotmail.example>',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset="US-ASCII"',
    '',
    'This is an email abuse report for an email message received from IP 192.0.2.1 on Mon, 23 Nov 2026 09:00:00 +0000.',
    '',
    `--${boundary}`,
    'Content-Type: message/feedback-report',
    '',
    ...fields,
    '',
    `--${boundary}`,
    'Content-Type: message/rfc822',
    'Content-Disposition: inline',
    '',
    ...original,
    '',
    `--${boundary}--`,
    '',
  ].join(CRLF);
}

arf('given an abuse report, when parsed, then arf with the complaint and one complained recipient', async () => {
  const report = await parseReport(arfReport([
    'Feedback-Type: abuse', 'User-Agent: SomeGenerator/1.0', 'Version: 1',
    `Original-Mail-From: <${RETURN_PATH}>`, 'Original-Rcpt-To: <Kim@Example.net>', 'Arrival-Date: Mon, 23 Nov 2026 09:00:00 +0000',
  ]));
  assert.is(report.kind, 'arf');
  assert.is(report.reportMessageId, 'arf.1@feedback.hotmail.example');
  assert.is(report.originalMessageId, `${EMAIL_ID}@example.com`);
  assert.equal(report.complaint, { feedbackType: 'abuse', userAgent: 'SomeGenerator/1.0', originalRecipient: 'kim@example.net', originalMailFrom: RETURN_PATH });
  const rcpt = only(report);
  assert.is(rcpt.address, 'kim@example.net');
  assert.is(rcpt.outcome, 'complained');
  assert.equal([rcpt.status, rcpt.action, rcpt.diagnosticCode], [null, null, null]);
  assert.match(rcpt.reason, /abuse/);
});

arf('given a report without Original-Rcpt-To, when parsed, then the returned message\'s To names the recipient', async () => {
  const report = await parseReport(arfReport(['Feedback-Type: abuse', 'User-Agent: Yahoo!-Mail-Feedback/2.0', 'Version: 0.1']));
  assert.is(only(report).address, 'kim@example.net');
  assert.is(report.complaint!.originalRecipient, 'kim@example.net');
});

arf('given not-spam and auth-failure reports, when parsed, then no complaint outcome (see complaintOutcome)', async () => {
  for (const type of ['not-spam', 'auth-failure']) {
    const report = await parseReport(arfReport([`Feedback-Type: ${type}`, 'User-Agent: x/1', 'Version: 1', 'Original-Rcpt-To: kim@example.net']));
    assert.is(report.complaint!.feedbackType, type);
    assert.is(only(report).outcome, 'undetermined', type);
  }
});

arf('given Original-Rcpt-To with a quoted local part holding an escaped quote, when parsed, then that address', async () => {
  const report = await parseReport(arfReport(['Feedback-Type: abuse', 'User-Agent: x/1', 'Version: 1', 'Original-Rcpt-To: <"a\\"b"@example.net>']));
  assert.is(only(report).address, '"a\\"b"@example.net');
  assert.is(report.complaint!.originalRecipient, '"a\\"b"@example.net');
});

arf.run();

const texts = suite('plain-text bounces');

texts('given a qmail bounce, when parsed, then kind text and the recipient it names, hard', async () => {
  const raw = [
    'From: MAILER-DAEMON@mx.example.net',
    `To: ${RETURN_PATH}`,
    'Subject: failure notice',
    'Message-ID: <q1@mx.example.net>',
    '',
    'Hi. This is the qmail-send program at mx.example.net.',
    "I'm afraid I wasn't able to deliver your message to the following addresses.",
    "This is a permanent error; I've given up. Sorry it didn't work out.",
    '',
    '<Lee@Example.net>:',
    'Sorry, no mailbox here by that name. (#5.1.1)',
    '',
    '--- Below this line is a copy of the message.',
    '',
    `Return-Path: <${RETURN_PATH}>`,
    'From: Hello <hello@example.com>',
    'To: lee@example.net',
    `Message-ID: <${EMAIL_ID}@example.com>`,
    '',
    'hello',
  ].join('\n');
  const report = await parseReport(raw);
  assert.is(report.kind, 'text');
  assert.is(report.originalMessageId, `${EMAIL_ID}@example.com`);
  const rcpt = only(report);
  assert.equal([rcpt.address, rcpt.outcome, rcpt.status, rcpt.action], ['lee@example.net', 'hard_bounced', '5.1.1', null]);
  assert.match(rcpt.reason, /no mailbox here by that name/);
});

texts('given an Exim bounce for two recipients, when parsed, then each gets the cause stated under it', async () => {
  const raw = [
    'From: Mail Delivery System <Mailer-Daemon@mx.example.org>',
    `To: ${RETURN_PATH}`,
    'Subject: Mail delivery failed: returning message to sender',
    '',
    'This message was created automatically by mail delivery software.',
    '',
    'A message that you sent could not be delivered to one or more of its',
    'recipients. This is a permanent error. The following address(es) failed:',
    '',
    '  mo@example.net',
    '    SMTP error from remote mail server after RCPT TO:<mo@example.net>:',
    '    host mx.example.net [192.0.2.12]: 550 5.2.2 <mo@example.net>... Mailbox Full',
    '  ned@example.net',
    '    SMTP error from remote mail server after RCPT TO:<ned@example.net>:',
    '    host mx.example.net [192.0.2.12]: 550 5.1.1 <ned@example.net>... User Unknown',
    '',
    '------ This is a copy of the message, including all the headers. ------',
    '',
    `Return-path: <${RETURN_PATH}>`,
    'From: Hello <hello@example.com>',
  ].join('\n');
  const report = await parseReport(raw);
  assert.equal(report.recipients.map((r) => [r.address, r.outcome]), [['mo@example.net', 'soft_bounced'], ['ned@example.net', 'hard_bounced']]);
});

texts('given an auto-reply, when parsed, then no recipients', async () => {
  const report = await parseReport(['From: kim@example.net', `To: ${RETURN_PATH}`, 'Subject: Out of Office: Your receipt', 'Auto-Submitted: auto-replied', '', 'I am away until Monday. For urgent matters write to bob@example.net.'].join('\n'));
  assert.is(report.kind, 'text');
  assert.equal(report.recipients, []);
});

texts('given a qmail bounce naming a quoted local part with an escaped quote, when parsed, then that address', async () => {
  const raw = [
    'From: MAILER-DAEMON@mx.example.net',
    `To: ${RETURN_PATH}`,
    'Subject: failure notice',
    '',
    "I'm afraid I wasn't able to deliver your message to the following addresses.",
    "This is a permanent error; I've given up. Sorry it didn't work out.",
    '',
    '<"a\\"b"@example.net>:',
    'Sorry, no mailbox here by that name. (#5.1.1)',
    '',
  ].join('\n');
  assert.equal((await parseReport(raw)).recipients.map((r) => [r.address, r.outcome]), [['"a\\"b"@example.net', 'hard_bounced']]);
});

texts.run();

const fuzz = suite('damaged and hostile input never throws');

async function survives(name: string, raw: Buffer | string, limitMs = 5_000): Promise<ParsedReport> {
  const started = performance.now();
  const report = await parseReport(raw);
  const took = performance.now() - started;
  assert.ok(took < limitMs, `${name} took ${took.toFixed(0)} ms`);
  assert.ok(['dsn', 'arf', 'text'].includes(report.kind), name);
  assert.ok(Array.isArray(report.recipients), name);
  assert.ok(report.recipients.length <= MAX_RECIPIENTS, name);
  return report;
}

const good = postfixDsn([{ address: 'ann@example.net', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 unknown' }]);

fuzz('given empty input, when parsed, then kind text with nothing in it', async () => {
  for (const raw of ['', Buffer.alloc(0)]) {
    assert.equal(await survives('empty', raw), { kind: 'text', reportMessageId: null, envelopeId: null, originalMessageId: null, recipients: [], complaint: null });
  }
});

fuzz('given a DSN truncated at every 97th byte, when parsed, then never throws', async () => {
  const bytes = Buffer.from(good);
  for (let end = 0; end <= bytes.length; end += 97) await survives(`truncated at ${end}`, bytes.subarray(0, end));
});

fuzz('given a DSN whose boundary does not match its parts, when parsed, then never throws and still finds the fields in the body', async () => {
  const report = await survives('wrong boundary', good.replace('boundary="4C8D31A2F4.1700000000/mx.example.org"', 'boundary="something-else"'));
  assert.equal(report.recipients.map((r) => [r.address, r.outcome]), [['ann@example.net', 'hard_bounced']]);
});

fuzz('given unterminated and nested-forever multiparts, when parsed, then never throws', async () => {
  await survives('no closing boundary', good.replace(/--4C8D31A2F4\.1700000000\/mx\.example\.org--\r\n$/, ''));
  const depth = 2_000;
  const nested = Array.from({ length: depth }, (_, i) => `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n`).join('');
  await survives('deep nesting', `Subject: x\r\n${nested}`);
});

fuzz('given a 1 MB header, when parsed, then never throws (garbage: no recipients)', async () => {
  const report = await survives('1 MB header', `X-Big: ${'a'.repeat(1024 * 1024)}\r\n${good}`);
  assert.equal(report.recipients, []);
  await survives('1 MB folded header', `Subject: ${'x '.repeat(100_000).replace(/ /g, '\r\n ')}\r\n${good}`);
});

fuzz('given random bytes, when parsed, then never throws', async () => {
  for (let i = 0; i < 50; i++) await survives(`random ${i}`, randomBytes(1 + Math.floor(Math.random() * 20_000)));
});

fuzz('given non-UTF-8 bytes in headers, fields and text, when parsed, then never throws and still reads the DSN', async () => {
  const latin1 = Buffer.from(good.replace('Undelivered Mail Returned to Sender', 'Unzustellbar: Ã¼ber').replace('Remote-MTA: dns; mx.example.net', 'Remote-MTA: dns; mx.\xff\xfe.example.net'), 'latin1');
  const report = await survives('latin1', latin1);
  assert.is(report.recipients[0]?.outcome, 'hard_bounced');
  await survives('invalid utf-8', Buffer.concat([Buffer.from('Content-Type: text/plain; charset=utf-8\r\n\r\n'), Buffer.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0xbc]), Buffer.from('\r\nFinal-Recipient: rfc822; a@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\n')]));
  await survives('unknown charset', 'Content-Type: text/plain; charset=x-no-such-charset\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64!!!');
});

fuzz('given input beyond MAX_REPORT_BYTES and thousands of recipients, when parsed, then bounded', async () => {
  const many = postfixDsn(Array.from({ length: 5_000 }, (_, i) => ({ address: `u${i}@example.net`, action: 'failed', status: '5.1.1' })));
  const report = await survives('5000 recipients', many);
  assert.is(report.recipients.length, MAX_RECIPIENTS);
  await survives('oversized', Buffer.concat([Buffer.from(good), Buffer.alloc(MAX_REPORT_BYTES + 1024, 0x41)]));
  await survives('address soup', `From: MAILER-DAEMON@x.example\r\nSubject: Undelivered\r\n\r\n${Array.from({ length: 20_000 }, (_, i) => `<u${i}@example.net>:`).join('\n')}`);
});

fuzz('given values that are not a Buffer or a string, when parsed, then an empty text report', async () => {
  for (const value of [null, undefined, 42, {}]) {
    assert.equal((await parseReport(value as unknown as string)).recipients, []);
  }
});

fuzz('given quotes and backslashes where addresses are read, when parsed, then bounded', async () => {
  const soups = ['"\\'.repeat(400), '"' + '\\"'.repeat(600), '"' + 'a\\'.repeat(600) + '@', ('"' + 'x'.repeat(61) + '\\').repeat(30) + '@example.net'];
  for (const [i, soup] of soups.entries()) {
    const field = postfixDsn([{ address: `${soup}@example.net`, action: 'failed', status: '5.1.1' }]);
    await survives(`Final-Recipient soup ${i}`, field, 1_000);
    await survives(`text soup ${i}`, `From: MAILER-DAEMON@x.example\r\nSubject: Undelivered\r\n\r\n${Array.from({ length: 200 }, () => `<${soup}@example.net>:`).join('\n')}`, 1_000);
  }
});

fuzz.run();
