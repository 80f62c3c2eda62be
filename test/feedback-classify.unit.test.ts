// Given/when/then tests of the report classification rules (domain/feedback/classify.ts): the
// DSN rules, every text rule (each has an example that it, and no rule before it, matches), the
// softening of hard results, the value sets and the reason string.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  BOUNCE_RULES, BOUNCE_TYPES, COMPLAINT_TYPES, DELAY_TYPES, FALLBACK_RULES, MAX_REASON_LENGTH, PHRASE_RULES, REPLY_RULES, STATUS_RULES,
  bounceReason, bounceType, classifyDsnRecipient, classifyText, complaintOutcome, complaintType, findEnhancedCode, findReplyCode,
  normalizeStatus, type ReportOutcome,
} from '../domain/feedback/classify.ts';

const dsn = suite('DSN recipients (RFC 3464)');

const failed = (status: string | null, diagnosticCode: string | null = null, notice: string | null = null) =>
  classifyDsnRecipient({ action: 'failed', status, diagnosticCode, notice });

dsn('given Action: failed and a 5.1.1 status, when classified, then hard_bounced', () => {
  assert.is(failed('5.1.1', 'smtp; 550 5.1.1 <a@example.org>: Recipient address rejected: User unknown').outcome, 'hard_bounced');
  assert.is(failed('5.1.1').outcome, 'hard_bounced');
});

dsn('given Action: failed and a bare 5.0.0 with no diagnostic, when classified, then hard_bounced (the permanent default)', () => {
  const verdict = failed('5.0.0');
  assert.is(verdict.outcome, 'hard_bounced');
  assert.is(verdict.rule, 'status_permanent');
});

dsn('given Action: failed and a 4.x.x status, when classified, then soft_bounced, even beside "user unknown"', () => {
  assert.is(failed('4.4.7', 'smtp; 421 connection timed out').outcome, 'soft_bounced');
  assert.is(failed('4.1.1', 'smtp; 450 4.1.1 <a@example.org>: Recipient address rejected: User unknown in virtual alias table').outcome, 'soft_bounced');
});

dsn('given Action: failed and a 5.x.x status whose subject is not the address, when classified, then soft_bounced', () => {
  for (const [status, rule] of [['5.2.2', 'status_mailbox_full'], ['5.3.4', 'status_mail_system'], ['5.7.1', 'status_policy'], ['5.1.8', 'status_sender_address'], ['5.6.0', 'status_content'], ['5.5.0', 'status_protocol']]) {
    const verdict = failed(status);
    assert.is(verdict.outcome, 'soft_bounced', status);
    assert.is(verdict.rule, rule, status);
  }
});

dsn('given Action: failed and 5.x.x but the diagnostic states a softer cause, when classified, then the phrase decides', () => {
  assert.is(failed('5.1.1', 'smtp; 552 5.1.1 Mailbox full').outcome, 'soft_bounced');
  assert.is(failed('5.0.0', 'smtp; 550 Message rejected as spam').outcome, 'soft_bounced');
});

dsn('given a 5.0.0 status and a diagnostic with its own code, when classified, then the diagnostic\'s code is used', () => {
  const verdict = failed('5.0.0', 'smtp; 550 5.7.1 Relaying denied for this client');
  assert.is(verdict.status, '5.7.1');
  assert.is(verdict.outcome, 'soft_bounced');
});

dsn('given Action: failed, no status, when the diagnostic carries codes, then they decide; else undetermined', () => {
  assert.is(failed(null, 'smtp; 550 5.1.1 nope').outcome, 'hard_bounced');
  assert.is(failed(null, 'smtp; 452 too busy').outcome, 'soft_bounced');
  assert.is(failed('unknown', 'smtp; 550 no').outcome, 'hard_bounced');
  assert.is(failed(null, 'x-unix; something happened').outcome, 'undetermined');
  assert.is(failed(null, null).outcome, 'undetermined');
});

dsn('given Action: failed with no diagnostic, when the notice describes the recipient, then the notice decides', () => {
  assert.is(failed('5.0.0', null, '<a@example.org>: host mx said: 552 5.2.2 Quota exceeded').outcome, 'soft_bounced');
  assert.is(failed('5.0.0', null, '<a@example.org>: host mx said: 550 no such user here').outcome, 'hard_bounced');
});

dsn('given Action: delayed, when classified, then delayed with a delay type from its diagnostic', () => {
  const verdict = classifyDsnRecipient({ action: 'delayed', status: '4.4.1', diagnosticCode: 'X-Postfix; connect to mx.example.org: Connection timed out' });
  assert.is(verdict.outcome, 'delayed');
  assert.is(verdict.delayType, 'network');
  assert.is(classifyDsnRecipient({ action: 'delayed', status: '4.2.2', diagnosticCode: 'smtp; 452 4.2.2 Mailbox full' }).delayType, 'mailbox_full');
  assert.is(classifyDsnRecipient({ action: 'delayed', status: '4.0.0', diagnosticCode: null }).delayType, 'general');
  assert.is(classifyDsnRecipient({ action: 'delayed', status: null, diagnosticCode: null }).delayType, 'undetermined');
});

dsn('given Action: delivered, relayed or expanded (any case), or a 2.x.x status with an unknown action, then delivered', () => {
  for (const action of ['delivered', 'relayed', 'expanded', 'Delivered']) {
    assert.is(classifyDsnRecipient({ action, status: '2.0.0', diagnosticCode: null }).outcome, 'delivered', action);
  }
  assert.is(classifyDsnRecipient({ action: 'deliverable', status: '2.1.5', diagnosticCode: 'smtp; 250 2.1.5 Ok' }).outcome, 'delivered');
});

dsn('given Action: failed and a delay wording in the diagnostic, when classified, then soft_bounced: failed is final', () => {
  assert.is(failed('5.4.7', 'delivery has been delayed for 5 days; giving up').outcome, 'soft_bounced');
});

dsn('given a missing action and a 5.x.x status, when classified, then it is read as failed', () => {
  assert.is(classifyDsnRecipient({ action: null, status: '5.1.1', diagnosticCode: null }).outcome, 'hard_bounced');
});

dsn.run();

const text = suite('text rules (one example each)');

/** An example per rule that this rule, and no rule before it in BOUNCE_RULES, matches. */
const EXAMPLES: Array<[rule: string, example: string, outcome: ReportOutcome]> = [
  ['delay_notice', 'THIS IS A WARNING MESSAGE ONLY. YOU DO NOT NEED TO RESEND YOUR MESSAGE. Will keep trying for 5 days.', 'delayed'],
  ['sender_rejected', '553 <root@host.local>... Domain of sender address root@host.local does not exist', 'soft_bounced'],
  ['mailer_error', 'procmail: Couldn\'t create "/var/spool/mail/neko"', 'soft_bounced'],
  ['mailbox_full', 'Remote host said: 552 Error: disk quota exceeded', 'soft_bounced'],
  ['vendor_account_missing', '554 delivery error: dd This user doesn\'t have a yahoo.com account (x@yahoo.com) [0]', 'hard_bounced'],
  ['kddi_recipient_filter', 'host lsean.ezweb.ne.jp[27.85.176.228] said: 550 : User unknown', 'soft_bounced'],
  ['recipient_access_denied', '550 5.4.1 <a@example.br>: Recipient address rejected: Access denied. AS(201806281)', 'hard_bounced'],
  ['address_unknown', 'Sorry, no mailbox here by that name. (#5.1.1)', 'hard_bounced'],
  ['dns_temporary', 'Host or domain name not found. Name service error for name=example.org type=MX: Host not found, try again', 'soft_bounced'],
  ['domain_unknown', 'Sorry, I couldn\'t find any host named example.invalid. (#5.1.2)', 'hard_bounced'],
  ['address_moved', '551 User has moved; please try <new@example.org>', 'hard_bounced'],
  ['domain_accepts_no_mail', '556 5.1.10 example.org does not accept mail (null MX)', 'hard_bounced'],
  ['message_too_large', '552 5.3.4 Message size exceeds fixed maximum message size', 'soft_bounced'],
  ['mailbox_disabled', '550 5.2.1 The email account that you tried to reach is disabled.', 'soft_bounced'],
  ['relaying_denied', '554 5.7.1 <a@example.org>: Relay access denied', 'soft_bounced'],
  ['policy_rejected', '550 5.7.1 Service unavailable; client [192.0.2.1] blocked using zen.spamhaus.org', 'soft_bounced'],
  ['rate_limited', '421 4.7.0 Too many connections from your IP', 'soft_bounced'],
  ['expired', 'retry timeout exceeded', 'soft_bounced'],
  ['mail_loop', '554 5.4.6 Too many hops', 'soft_bounced'],
  ['network_error', 'connect to mx.example.org[192.0.2.2]:25: No route to host', 'soft_bounced'],
  ['protocol_error', '500 5.5.1 Command unrecognized', 'soft_bounced'],
  ['recipient_server_error', '451 Local error in processing', 'soft_bounced'],
  ['status_sender_address', 'said: 553 5.1.7 The sender address is odd', 'soft_bounced'],
  ['status_mailbox_full', 'said: 452 4.2.2 over', 'soft_bounced'],
  ['status_network', '4.4.2 bad connection', 'soft_bounced'],
  ['status_policy_transient', 'said: 451 4.7.1 please come back', 'soft_bounced'],
  ['status_recipient_server_transient', 'said: 451 4.3.0 nope', 'soft_bounced'],
  ['status_transient', 'said: 450 4.1.1 nope', 'soft_bounced'],
  ['status_address_moved', 'said: 550 5.1.6 gone', 'hard_bounced'],
  ['status_domain_accepts_no_mail', 'said: 550 5.1.10 nope', 'hard_bounced'],
  ['status_bad_destination', 'said: 550 5.1.1 nope', 'hard_bounced'],
  ['status_unroutable', 'said: 550 5.4.4 nope', 'hard_bounced'],
  ['status_mailbox', 'said: 550 5.2.0 nope', 'soft_bounced'],
  ['status_mail_system', 'said: 554 5.3.0 nope', 'soft_bounced'],
  ['status_protocol', 'said: 550 5.5.0 nope', 'soft_bounced'],
  ['status_content', 'said: 554 5.6.0 nope', 'soft_bounced'],
  ['status_policy', 'said: 550 5.7.0 nope', 'soft_bounced'],
  ['status_permanent', 'said: 550 5.9.9 nope', 'hard_bounced'],
  ['reply_storage_exceeded', 'Remote host said: 452 nope', 'soft_bounced'],
  ['reply_transient', 'Remote host said: 421 nope', 'soft_bounced'],
  ['reply_domain_accepts_no_mail', 'Remote host said: 521 nope', 'hard_bounced'],
  ['reply_mailbox_unavailable', 'Remote host said: 550 nope', 'hard_bounced'],
  ['reply_protocol', 'Remote host said: 501 nope', 'soft_bounced'],
  ['reply_transaction_failed', 'Remote host said: 554 Transaction failed', 'soft_bounced'],
  ['reply_permanent', 'Remote host said: 571 nope', 'hard_bounced'],
  ['text_temporary', 'A transient condition kept the message here.', 'soft_bounced'],
  ['text_permanent', 'This is a permanent error; I\'ve given up. Sorry it didn\'t work out.', 'hard_bounced'],
];

text('every rule of BOUNCE_RULES has an example (the table below covers them all)', () => {
  const covered = new Set(EXAMPLES.map(([rule]) => rule));
  const names = new Set(BOUNCE_RULES.map((rule) => rule.name));
  for (const name of names) assert.ok(covered.has(name), `no example for ${name}`);
  assert.is(BOUNCE_RULES.length, PHRASE_RULES.length + STATUS_RULES.length + REPLY_RULES.length + FALLBACK_RULES.length);
});

for (const [rule, example, outcome] of EXAMPLES) {
  text(`given "${example.slice(0, 60)}", when classified, then rule ${rule} -> ${outcome}`, () => {
    const verdict = classifyText(example);
    assert.is(verdict.rule, rule);
    assert.is(verdict.outcome, outcome);
  });
}

text('given a hard phrase next to a class 4 code, when classified, then soft_bounced', () => {
  const verdict = classifyText('450 4.1.1 <a@example.org>: Recipient address rejected: User unknown');
  assert.is(verdict.rule, 'address_unknown');
  assert.is(verdict.outcome, 'soft_bounced');
});

text('given "user unknown" refused after DATA without an X.1 status, when classified, then soft_bounced (a filter)', () => {
  const postfix = classifyText('<a@example.net>: host mail.example.net said: 550 Unknown user a@example.net (in reply to end of DATA command)');
  assert.equal([postfix.rule, postfix.outcome], ['refused_after_data', 'soft_bounced']);
  const sendmail = classifyText('... while talking to mx.example.org.:\n>>> DATA\n<<< 550 5.0.0 <a@example.org>... User unknown');
  assert.is(sendmail.outcome, 'soft_bounced');
});

text('given a refusal after DATA with an explicit 5.1.x status or a vendor statement, when classified, then still hard', () => {
  assert.is(classifyText('>>> DATA\n<<< 550 5.1.1 <a@example.org>... User Unknown').outcome, 'hard_bounced');
  assert.is(classifyText('>>> DATA\n<<< 554 delivery error: dd This user doesn\'t have a yahoo.com account (a@yahoo.com)').outcome, 'hard_bounced');
});

text('given a refusal before RCPT TO, when classified, then soft_bounced whatever the words', () => {
  const exim = classifyText('SMTP error from remote mail server after MAIL FROM:<me@example.jp> SIZE=1543:\nhost mx.example.jp [192.0.2.20]: 550 5.1.1 unknown');
  assert.equal([exim.rule, exim.outcome], ['refused_before_rcpt', 'soft_bounced']);
  assert.is(classifyText('host mx.example.org said: 550 Rejected (in reply to MAIL FROM command)').outcome, 'soft_bounced');
});

text('given an explicit sender status, when the words speak of an unknown domain, then the status wins (soft)', () => {
  assert.is(classifyText('550 5.1.7 No such domain neko.example.com.').outcome, 'soft_bounced');
});

text('given an address whose local part reads like a cause, when classified, then the address is not read', () => {
  assert.is(classifyText('<filtered@example.jp>:\nRemote host said: 550 5.2.1 <filtered@example.jp>... User Unknown').rule, 'address_unknown');
  assert.is(classifyText('<spam-blocked@example.jp>: 550 5.1.1 unknown').outcome, 'hard_bounced');
});

text('given a text that states nothing, when classified, then undetermined', () => {
  assert.is(classifyText('Hello, I am out of the office until Monday.').outcome, 'undetermined');
  assert.is(classifyText('').outcome, 'undetermined');
});

text('given codes that are not failure codes, when searched, then they are not taken (IP addresses, versions, 2.x.x)', () => {
  assert.is(findEnhancedCode('host 10.5.1.1 (8.14.3/8.14.3) said 250 2.1.5 Ok'), null);
  assert.is(findEnhancedCode('(#5.1.1)'), '5.1.1');
  assert.is(findEnhancedCode('550-5.7.001 blocked'), '5.7.1');
  assert.is(findReplyCode('Remote host said: 550 nope'), '550');
  assert.is(findReplyCode('Sent 2024 messages, 550 of them'), null);
  assert.is(normalizeStatus('5.1.1 (bad destination mailbox address)'), '5.1.1');
  assert.is(normalizeStatus('smtp; 550'), null);
});

text('given a 1 MB text of unusual characters, when classified, then it finishes quickly (bounded input)', () => {
  const started = performance.now();
  classifyText(`${'a'.repeat(500_000)}@${'b.'.repeat(250_000)}`);
  classifyText('<'.repeat(1_000_000));
  classifyText('user '.repeat(200_000));
  assert.ok(performance.now() - started < 2_000, `took ${performance.now() - started} ms`);
});

text.run();

const values = suite('value sets, complaints and reasons');

values('given each outcome, when its bounce_type is asked, then hard/soft/undetermined for failures and null otherwise', () => {
  assert.is(bounceType('hard_bounced'), 'hard');
  assert.is(bounceType('soft_bounced'), 'soft');
  assert.is(bounceType('undetermined'), 'undetermined');
  for (const outcome of ['delayed', 'delivered', 'complained'] as const) assert.is(bounceType(outcome), null);
  assert.equal([...BOUNCE_TYPES], ['hard', 'soft', 'undetermined']);
});

values('given ARF feedback types, when mapped, then registered types stay and others are "other"', () => {
  for (const type of COMPLAINT_TYPES) assert.is(complaintType(type), type);
  assert.is(complaintType(' Abuse '), 'abuse');
  assert.is(complaintType('opt-out'), 'other');
  assert.is(complaintType(null), 'other');
});

values('given ARF feedback types, when their outcome is asked, then not-spam and auth-failure are no complaint', () => {
  for (const type of ['abuse', 'fraud', 'virus', 'other', 'opt-out']) assert.is(complaintOutcome(type), 'complained', type);
  assert.is(complaintOutcome('not-spam'), 'undetermined');
  assert.is(complaintOutcome('auth-failure'), 'undetermined');
});

values('given every delay rule, when its delay type is read, then it is one of DELAY_TYPES', () => {
  for (const rule of BOUNCE_RULES) if (rule.delay) assert.ok((DELAY_TYPES as readonly string[]).includes(rule.delay), rule.name);
});

values('given a status and a diagnostic, when the reason is built, then one short line without the diagnostic type', () => {
  assert.is(bounceReason({ status: '5.1.1', diagnosticCode: 'smtp; 550 5.1.1 <a@example.org>:\n    Recipient address rejected: User unknown' }),
    '550 5.1.1 <a@example.org>: Recipient address rejected: User unknown');
  assert.is(bounceReason({ status: '5.0.0', diagnosticCode: 'smtp; 550 Rejected' }), '5.0.0 550 Rejected');
  assert.is(bounceReason({ status: '4.4.7', diagnosticCode: null }), '4.4.7');
  assert.is(bounceReason({ status: null, diagnosticCode: null, action: 'Failed' }), 'failed');
  assert.is(bounceReason({}), 'no diagnostic given');
  const long = bounceReason({ status: '5.7.1', diagnosticCode: `smtp; 550 ${'x'.repeat(5000)}` });
  assert.is(long.length, MAX_REASON_LENGTH);
  assert.ok(long.endsWith('…'));
});

values.run();
