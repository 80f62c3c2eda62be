// The smtp (smarthost) transport against real smtp-server instances on 127.0.0.1, through
// real nodemailer: bytes, envelope and DSN parameters as sent, TLS rules, and how every kind of
// answer maps to per-recipient outcomes.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { makeTestCert, smtpError, startSmtpSink } from './support/smtp-sink.ts';
import type { SmtpSink, SmtpSinkOptions, TestCert } from './support/smtp-sink.ts';
import { freePort } from './support/free-port.ts';

interface Context {
  cert: TestCert;
  sink?: SmtpSink;
  transport?: SmtpTransport;
}

const RAW = Buffer.concat([
  Buffer.from('DKIM-Signature: v=1; a=rsa-sha256; d=example.test; s=s1; b=abc\r\nFrom: a@example.test\r\nTo: b@example.org\r\nSubject: hi\r\nMessage-ID: <m1@example.test>\r\n\r\n'),
  // A leading dot (dot-stuffed on the wire), a lone "." line, 8-bit bytes.
  Buffer.from('.starts with a dot\r\n.\r\nline\r\n'),
  Buffer.from([0xc3, 0xa9, 0x0d, 0x0a]),
]);

function message(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return {
    emailId: 'em_smtp1',
    envelope: { mailFrom: 'b+em_smtp1@bounce.example.test', recipients: ['ann@example.org', 'bob@example.org', 'cy@example.net'] },
    raw: RAW,
    messageId: 'm1@example.test',
    ...overrides,
  };
}

async function setup(ctx: Context, sinkOptions: SmtpSinkOptions, url: (port: number) => string, extra: { ca?: boolean } = {}): Promise<SmtpTransport> {
  ctx.sink = await startSmtpSink({ cert: ctx.cert, ...sinkOptions });
  ctx.transport = new SmtpTransport({
    url: url(ctx.sink.port),
    ca: extra.ca === false ? undefined : ctx.cert.cert,
    heloName: 'relay.test',
    connectTimeoutMs: 3000,
    commandTimeoutMs: 3000,
  });
  return ctx.transport;
}

const results = (outcome: TransportOutcome) => outcome.recipients.map((r) => [r.address, r.result, r.smtpCode, r.enhancedCode, r.stage]);

const smtp = suite<Context>('smtp transport');

smtp.before((ctx) => {
  ctx.cert = makeTestCert();
});

smtp.after.each(async (ctx) => {
  await ctx.transport?.close();
  await ctx.sink?.close();
  ctx.transport = undefined;
  ctx.sink = undefined;
});

smtp('over required STARTTLS with credentials from the URL: exact bytes, the envelope as given, DSN asked for, queue id read', async (ctx) => {
  const transport = await setup(
    ctx,
    { auth: { user: 'relay@user', pass: 'p@ss:w/rd' }, onData: () => ({ reply: '2.0.0 Ok: queued as 4F2A1B' }) },
    (port) => `smtp://relay%40user:p%40ss%3Aw%2Frd@127.0.0.1:${port}`,
  );
  const outcome = await transport.send(message());
  assert.equal(results(outcome), [
    ['ann@example.org', 'accepted', 250, '2.0.0', undefined],
    ['bob@example.org', 'accepted', 250, '2.0.0', undefined],
    ['cy@example.net', 'accepted', 250, '2.0.0', undefined],
  ]);
  assert.match(outcome.recipients[0].response, /queued as 4F2A1B/);
  assert.is(outcome.providerMessageId, '4F2A1B');
  const [received] = ctx.sink!.messages;
  assert.ok(received.raw.equals(RAW), 'bytes arrive exactly');
  assert.ok(received.secure, 'STARTTLS was used');
  assert.is(received.heloName, 'relay.test');
  assert.is(received.mailFrom && received.mailFrom.address, 'b+em_smtp1@bounce.example.test');
  assert.equal(received.rcptTo.map((r) => r.address), ['ann@example.org', 'bob@example.org', 'cy@example.net']);
  assert.equal(received.dsn, { ret: 'HDRS', envid: 'em_smtp1' });
  for (const rcpt of received.rcptTo) {
    assert.equal(rcpt.dsn?.notify, ['SUCCESS', 'FAILURE', 'DELAY']);
    assert.is(rcpt.args && rcpt.args.NOTIFY, 'SUCCESS,FAILURE,DELAY');
  }
  const mailFromArgs = ctx.sink!.mailFromCommands[0].args;
  assert.is(mailFromArgs && mailFromArgs.RET, 'HDRS');
  assert.is(mailFromArgs && mailFromArgs.ENVID, 'em_smtp1');
});

smtp('a reply naming no queue id: the Message-ID is the provider id; the pooled connection serves the next send', async (ctx) => {
  const transport = await setup(ctx, {}, (port) => `smtp://127.0.0.1:${port}`);
  const first = await transport.send(message());
  const second = await transport.send(message({ emailId: 'em_smtp2', messageId: 'm2@example.test' }));
  assert.is(first.providerMessageId, 'm1@example.test');
  assert.is(second.providerMessageId, 'm2@example.test');
  assert.is(ctx.sink!.messages.length, 2);
  assert.is(ctx.sink!.connections, 1);
});

smtp('5xx for one RCPT: that recipient rejected, the others accepted and sent', async (ctx) => {
  const transport = await setup(
    ctx,
    { onRcptTo: (address) => (address.address === 'bob@example.org' ? smtpError(550, '5.1.1 No such user') : undefined) },
    (port) => `smtp://127.0.0.1:${port}`,
  );
  const outcome = await transport.send(message());
  assert.equal(results(outcome), [
    ['ann@example.org', 'accepted', 250, null, undefined],
    ['bob@example.org', 'rejected', 550, '5.1.1', 'rcpt_to'],
    ['cy@example.net', 'accepted', 250, null, undefined],
  ]);
  assert.match(outcome.recipients[1].response, /No such user/);
  assert.equal(ctx.sink!.messages[0].rcptTo.map((r) => r.address), ['ann@example.org', 'cy@example.net']);
});

smtp('5xx after DATA: every recipient rejected at stage data', async (ctx) => {
  const transport = await setup(ctx, { onData: () => ({ error: smtpError(554, '5.7.1 Message refused as spam') }) }, (port) => `smtp://127.0.0.1:${port}`);
  const outcome = await transport.send(message());
  assert.equal(results(outcome).map((r) => r.slice(1)), [
    ['rejected', 554, '5.7.1', 'data'],
    ['rejected', 554, '5.7.1', 'data'],
    ['rejected', 554, '5.7.1', 'data'],
  ]);
  assert.is(outcome.providerMessageId, null);
});

smtp('5xx at MAIL FROM: every recipient rejected at stage mail_from', async (ctx) => {
  const transport = await setup(ctx, { onMailFrom: () => smtpError(553, '5.7.1 Sender not allowed') }, (port) => `smtp://127.0.0.1:${port}`);
  const outcome = await transport.send(message());
  assert.equal(results(outcome).map((r) => r.slice(1)), Array(3).fill(['rejected', 553, '5.7.1', 'mail_from']));
});

smtp('4xx answers are deferred: at MAIL FROM, at RCPT, after DATA', async (ctx) => {
  const transport = await setup(
    ctx,
    {
      onMailFrom: (address) => (address.address.startsWith('greylist') ? smtpError(451, '4.7.1 Greylisted') : undefined),
      onRcptTo: (address) => (address.address === 'full@example.org' ? smtpError(452, '4.2.2 Mailbox full') : undefined),
      onData: (_raw, session) => (session.envelope.mailFrom && session.envelope.mailFrom.address.startsWith('later') ? { error: smtpError(421, '4.3.0 Try later') } : {}),
    },
    (port) => `smtp://127.0.0.1:${port}`,
  );
  const atMail = await transport.send(message({ envelope: { mailFrom: 'greylist@bounce.example.test', recipients: ['ann@example.org'] } }));
  assert.equal(results(atMail), [['ann@example.org', 'deferred', 451, '4.7.1', 'mail_from']]);
  const atRcpt = await transport.send(message({ envelope: { mailFrom: 'b@bounce.example.test', recipients: ['full@example.org', 'ann@example.org'] } }));
  assert.equal(results(atRcpt), [
    ['full@example.org', 'deferred', 452, '4.2.2', 'rcpt_to'],
    ['ann@example.org', 'accepted', 250, null, undefined],
  ]);
  const afterData = await transport.send(message({ envelope: { mailFrom: 'later@bounce.example.test', recipients: ['ann@example.org'] } }));
  assert.equal(results(afterData), [['ann@example.org', 'deferred', 421, '4.3.0', 'data']]);
});

smtp('wrong credentials: deferred at stage connection (the smarthost refuses us, not the recipient)', async (ctx) => {
  const transport = await setup(ctx, { auth: { user: 'relay', pass: 'right' } }, (port) => `smtp://relay:wrong@127.0.0.1:${port}`);
  const outcome = await transport.send(message());
  assert.equal(outcome.recipients.map((r) => [r.result, r.stage, r.smtpCode]), Array(3).fill(['deferred', 'connection', 535]));
  assert.is(ctx.sink!.mailFromCommands.length, 0);
});

smtp('connection refused: deferred at stage connection', async (ctx) => {
  const port = await freePort();
  ctx.transport = new SmtpTransport({ url: `smtp://127.0.0.1:${port}`, ca: ctx.cert.cert, connectTimeoutMs: 3000, commandTimeoutMs: 3000 });
  const outcome = await ctx.transport.send(message());
  assert.equal(outcome.recipients.map((r) => [r.result, r.stage, r.smtpCode]), Array(3).fill(['deferred', 'connection', null]));
  assert.match(outcome.recipients[0].response, /ECONNREFUSED|connect/i);
});

smtp('STARTTLS required but not offered: deferred at stage tls, nothing sent in plain text', async (ctx) => {
  const transport = await setup(ctx, { noStartTls: true }, (port) => `smtp://127.0.0.1:${port}`);
  const outcome = await transport.send(message());
  assert.equal(outcome.recipients.map((r) => [r.result, r.stage]), Array(3).fill(['deferred', 'tls']));
  assert.match(outcome.recipients[0].response, /TLS failed: .*STARTTLS/);
  assert.is(ctx.sink!.mailFromCommands.length, 0);
  assert.is(ctx.sink!.messages.length, 0);
});

smtp('a certificate the transport does not trust: deferred at stage tls', async (ctx) => {
  const transport = await setup(ctx, {}, (port) => `smtp://127.0.0.1:${port}`, { ca: false });
  const outcome = await transport.send(message());
  assert.equal(outcome.recipients.map((r) => [r.result, r.stage]), Array(3).fill(['deferred', 'tls']));
  assert.is(ctx.sink!.mailFromCommands.length, 0);
});

smtp('smtps:// speaks TLS from the first byte', async (ctx) => {
  const transport = await setup(ctx, { implicitTls: true }, (port) => `smtps://127.0.0.1:${port}`);
  const outcome = await transport.send(message());
  assert.equal(outcome.recipients.map((r) => r.result), ['accepted', 'accepted', 'accepted']);
  assert.ok(ctx.sink!.messages[0].secure);
  assert.ok(ctx.sink!.messages[0].raw.equals(RAW));
});

smtp('tls=none to loopback: plain text even though STARTTLS is offered', async (ctx) => {
  const transport = await setup(ctx, {}, (port) => `smtp://127.0.0.1:${port}?tls=none`);
  const outcome = await transport.send(message());
  assert.equal(outcome.recipients.map((r) => r.result), ['accepted', 'accepted', 'accepted']);
  assert.is(ctx.sink!.messages[0].secure, false);
});

smtp('connection lost after the end of data, before the reply: unknown, never deferred', async (ctx) => {
  const transport = await setup(ctx, { onData: () => 'drop' }, (port) => `smtp://127.0.0.1:${port}`);
  const outcome = await transport.send(message());
  assert.equal(outcome.recipients.map((r) => [r.result, r.smtpCode]), Array(3).fill(['unknown', null]));
  assert.is(outcome.providerMessageId, null);
});

smtp('the transaction\'s start: asked once the session is set up (STARTTLS, AUTH) and before MAIL FROM; declined, nothing is sent and the connection serves the next message', async (ctx) => {
  const transport = await setup(ctx, { auth: { user: 'u', pass: 'p' } }, (port) => `smtp://u:p@127.0.0.1:${port}`);
  const seen: Array<{ connections: number; mailFroms: number }> = [];
  const declined = await transport.send(message(), {
    beginTransaction: async () => {
      seen.push({ connections: ctx.sink!.connections, mailFroms: ctx.sink!.mailFromCommands.length });
      return false;
    },
  });
  assert.equal(seen, [{ connections: 1, mailFroms: 0 }], 'asked once, connected, before MAIL FROM');
  assert.equal(results(declined), [
    ['ann@example.org', 'deferred', null, null, 'not_begun'], ['bob@example.org', 'deferred', null, null, 'not_begun'], ['cy@example.net', 'deferred', null, null, 'not_begun'],
  ]);
  assert.is(ctx.sink!.mailFromCommands.length, 0, 'no MAIL FROM');
  const sent = await transport.send(message(), { beginTransaction: async () => true });
  assert.ok(sent.recipients.every((r) => r.result === 'accepted'));
  assert.is(ctx.sink!.messages.length, 1);
  assert.is(ctx.sink!.connections, 1, 'the same connection');
  const failing = await transport.send(message(), { beginTransaction: async () => { throw new Error('the store is gone'); } }).then(() => null, (error: Error) => error);
  assert.is(failing?.message, 'the store is gone', 'a failing start ends the send with its error');
  assert.is(ctx.sink!.mailFromCommands.length, 1, 'and nothing was sent');
});

smtp('a transaction whose recipients were all refused leaves the session mid-envelope: it is reset before the next message, which goes out on the same connection', async (ctx) => {
  const transport = await setup(ctx, { onRcptTo: (address) => (address.address.startsWith('gone') ? smtpError(550, '5.1.1 User unknown') : undefined) }, (port) => `smtp://127.0.0.1:${port}?tls=none`);
  const refused = await transport.send(message({ envelope: { mailFrom: 'b@bounce.example.test', recipients: ['gone@example.org'] } }));
  assert.equal(results(refused), [['gone@example.org', 'rejected', 550, '5.1.1', 'rcpt_to']]);
  const next = await transport.send(message({ envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@example.org'] } }));
  assert.equal(results(next), [['ann@example.org', 'accepted', 250, null, undefined]]);
  assert.is(ctx.sink!.messages.length, 1);
  assert.is(ctx.sink!.connections, 1, 'the same connection');
});

smtp.run();
