// A body's line ends, whatever the client sent (CRLF, a bare LF, a bare CR), go out as CRLF, so
// the message signed is the message received: an SMTP client turns a bare CR into CRLF on the
// wire, and had the bare CR been signed as it was, the receiver's DKIM body hash would fail.
// Direct and template sends alike (both are composed by infra/mail/compose.ts), over real SMTP
// and into the outbox; mailauth verifies the signatures.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createTemplate } from '../apps/services/templates/templates.ts';
import { normalizeSendRequest } from '../domain/email/send-request.ts';
import { generateDkimKeyPair, type DkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { composeMessage, newMessageId } from '../infra/mail/compose.ts';
import { bareLineBreakAt } from '../infra/mail/mime-bytes.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { key: DkimKeyPair; sink: SmtpSink; transport: SmtpTransport; t: TestApp; tenant: DeliveryTenant; dns: TestDnsServer }
const test = suite<Context>('body line ends on the wire');

test.before(async (ctx) => {
  ctx.key = await generateDkimKeyPair();
  ctx.sink = await startSmtpSink();
  ctx.transport = new SmtpTransport({ url: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`, heloName: 'relay.test', connectTimeoutMs: 3000, commandTimeoutMs: 3000 });
  ctx.t = await startTestApp({}, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns = await startDnsServer(ctx.tenant.zone);
});
test.after(async (ctx) => {
  await ctx.transport.close();
  await ctx.sink.close();
  await ctx.t.close();
  await ctx.dns.close();
});

const verify = async (ctx: Context, raw: Buffer) => (await dkimVerify(raw, {
  strict: true,
  resolver: async () => [[`v=DKIM1; k=rsa; p=${ctx.key.publicKeyBase64}`]],
})).results[0];

const lf = (text: string | undefined) => (text ?? '').replace(/\r\n?/g, '\n');

for (const [what, body] of [['text', { text: 'Line one\rLine two\r\nend' }], ['html (quoted-printable)', { html: '<p>Grüße\rwelt</p>' }]] as const) {
  test(`a ${what} body with a bare CR: the bytes received over SMTP are the bytes signed, and DKIM passes there`, async (ctx) => {
    // The API accepts the body as it is.
    const admitted = normalizeSendRequest({ from: 'hello@acme.example', to: 'ann@example.org', subject: 'Hi', ...body });
    const { raw } = await composeMessage({
      from: admitted.from.mailbox, to: admitted.to.map((m) => m.mailbox), cc: [], replyTo: null, subject: admitted.subject,
      html: admitted.html, text: admitted.text, headers: admitted.headers, messageId: newMessageId('em_barecr', 'acme.example'),
      date: new Date('2025-03-01T12:00:00Z'), dkim: { domainName: 'acme.example', keySelector: ctx.key.selector, privateKey: ctx.key.privateKeyPem },
    });
    assert.is(bareLineBreakAt(raw), -1, 'every line break of the composed message is CRLF');
    assert.is((await verify(ctx, raw)).status.result, 'pass', 'as composed');
    const before = ctx.sink.messages.length;
    const outcome = await ctx.transport.send({ emailId: 'em_barecr', envelope: { mailFrom: 'b@bounce.acme.example', recipients: ['ann@example.org'] }, raw, messageId: 'em_barecr@acme.example' });
    assert.is(outcome.recipients[0].result, 'accepted');
    const received = ctx.sink.messages[before].raw;
    const verdict = await verify(ctx, received);
    assert.is(verdict.status.result, 'pass', `DKIM of the message as received: ${verdict.info}`);
    assert.ok(received.equals(raw), 'the bytes received are the bytes composed and signed');
    const parsed = await PostalMime.parse(received);
    const [sent, read] = 'text' in body ? [body.text, parsed.text] : [body.html, parsed.html];
    assert.is(lf(read).trimEnd(), lf(sent), 'the bare CR reads as a line break');
  });
}

test('a direct send and a template send with bare CRs and LFs in their bodies: the outbox holds CRLF only, and DKIM passes', async (ctx) => {
  const { t, tenant } = ctx;
  const template = await createTemplate(t.ctx.documents, t.ctx.services.templates.of(tenant.workspaceId), tenant.projectId, {
    name: 'Line ends', slug: 'line-ends', subject: 'Your order', text: 'Hello {{name}}\rYour order\nis {{order}}\r', html: '<p>Hello\r{{name}}</p>',
  }, t.ctx.now());
  assert.ok(template);
  const ids = [
    await send(t, tenant.key, { from: `app@${tenant.domain}`, to: 'ann@example.org', subject: 'Direct', text: 'one\rtwo\nthree\r\n\r', html: '<p>a\rb</p>\r' }),
    await send(t, tenant.key, { from: `app@${tenant.domain}`, to: 'ann@example.org', template: 'line-ends', variables: { name: 'Ann\rMarie', order: '12\r34' } }),
  ];
  for (const id of ids) {
    await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
    const raw = readFileSync(join(t.config.dataDir, 'outbox', `${id}.eml`));
    assert.is(bareLineBreakAt(raw), -1, `${id}: a bare ${raw[bareLineBreakAt(raw)] === 0x0d ? 'CR' : 'LF'} at byte ${bareLineBreakAt(raw)}`);
    const [verdict] = await dkimResults(ctx.dns, raw);
    assert.is(verdict.status.result, 'pass', `${id}: ${verdict.info}`);
  }
});

test.run();
