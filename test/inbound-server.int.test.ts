// The feedback SMTP server's own limits: STARTTLS with a configured certificate, the size limit
// on DATA, nothing accepted for addresses that are not Relay's return paths, and enhanced status
// codes (RFC 2034) advertised and carried once by every reply.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startInbound, type InboundServer } from '../apps/inbound/inbound-server.ts';
import { MAX_REPORT_BYTES } from '../infra/mail/report-parser.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail } from './support/delivery.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { dsn } from './support/reports.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';
import { SmtpSession } from './support/smtp-session.ts';

interface Context { ca: TestCa; sink: SmtpSink; t: TestApp; inbound: InboundServer; returnPath: string; emailId: string }

const test = suite<Context>('feedback SMTP server');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const cert = ctx.ca.issue(['feedback.relay.test']);
  writeFileSync(join(ctx.ca.dir, 'inbound.pem'), cert.cert);
  writeFileSync(join(ctx.ca.dir, 'inbound.key'), cert.key);
  ctx.sink = await startSmtpSink();
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` }, { processors: true });
  ctx.inbound = await startInbound({
    host: '127.0.0.1', port: 0, hostname: 'feedback.relay.test',
    tlsCertFile: join(ctx.ca.dir, 'inbound.pem'), tlsKeyFile: join(ctx.ca.dir, 'inbound.key'),
    events: ctx.t.stores.events, emails: ctx.t.ctx.services.emails, documents: ctx.t.stores.documents, secrets: ctx.t.ctx.services.secrets, now: () => new Date(), onError: () => {},
  });
  const tenant = await deliveryTenant(ctx.t);
  ctx.emailId = await send(ctx.t, tenant.key, { from: `hello@${tenant.domain}`, to: 'ann@example.org', subject: 'tls', text: 'hi' });
  await waitForDetail(ctx.t, tenant.key, ctx.emailId, (d) => d.status === 'sent', 'is sent');
  const m = ctx.sink.messages.find((m) => m.raw.toString().includes(`<${ctx.emailId}@`))!;
  ctx.returnPath = m.mailFrom === false ? '' : m.mailFrom.address;
});

test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
  await ctx.sink.close();
  ctx.ca.remove();
});

const client = (ctx: Context, requireTLS: boolean) => nodemailer.createTransport({
  host: '127.0.0.1', port: ctx.inbound.port, secure: false, requireTLS, tls: { ca: ctx.ca.ca, servername: 'feedback.relay.test' },
});

test('with a certificate configured, STARTTLS is offered and a report travels encrypted', async (ctx) => {
  const transport = client(ctx, true);
  try {
    const info = await transport.sendMail({ envelope: { from: 'MAILER-DAEMON@mx.example.org', to: ctx.returnPath }, raw: dsn({ recipient: 'ann@example.org', action: 'delayed', status: '4.4.1' }) });
    assert.match(info.response, /^250/);
  } finally {
    transport.close();
  }
});

test('a report over the size limit is refused (552) and records nothing', async (ctx) => {
  const transport = client(ctx, false);
  const before = (await ctx.t.stores.events.readStream(`email-${ctx.emailId}`)).length;
  try {
    const huge = `${dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' })}\r\n${'x'.repeat(998)}\r\n`.repeat(Math.ceil((MAX_REPORT_BYTES + 1024) / 1000));
    const error = await transport.sendMail({ envelope: { from: 'MAILER-DAEMON@mx.example.org', to: ctx.returnPath }, raw: huge }).then(() => null, (e: { responseCode?: number }) => e);
    assert.ok(error, 'refused');
    assert.is(error!.responseCode, 552);
  } finally {
    transport.close();
  }
  assert.is((await ctx.t.stores.events.readStream(`email-${ctx.emailId}`)).length, before);
});

test('a message to anything but a return path is refused at RCPT: it never relays', async (ctx) => {
  const transport = client(ctx, false);
  try {
    const error = await transport.sendMail({ envelope: { from: 'someone@example.org', to: 'victim@example.com' }, raw: 'Subject: relay me\r\n\r\nhi' }).then(() => null, (e: { responseCode?: number }) => e);
    assert.is(error?.responseCode, 550);
  } finally {
    transport.close();
  }
});

test('ENHANCEDSTATUSCODES is advertised, and each reply carries one enhanced code: its own where the server words it', async (ctx) => {
  const { session, greeting } = await SmtpSession.open(ctx.inbound.port);
  try {
    assert.match(greeting.text, /^220 feedback\.relay\.test ESMTP/);
    const ehlo = await session.command('EHLO client.example.org');
    assert.ok(ehlo.lines.includes('ENHANCEDSTATUSCODES'), ehlo.text);
    assert.match((await session.command('MAIL FROM:<>')).text, /^250 2\.1\.0 /);
    const refused = await session.command('RCPT TO:<victim@example.com>');
    assert.match(refused.text, /^550 5\.1\.1 <victim@example\.com>: no such mailbox here/);
    assert.not.match(refused.text, /5\.1\.1 5\.1\.1/);
    assert.match((await session.command(`RCPT TO:<${ctx.returnPath}>`)).text, /^250 2\.1\.5 /);
    assert.match((await session.command('NOOP')).text, /^250 2\.0\.0 /);
    assert.match((await session.command('QUIT')).text, /^221 2\.0\.0 /);
  } finally {
    session.close();
  }
});

test.run();
