// Header text that is itself written as RFC 2047 encoded words reads, for the recipient, as the
// client wrote it: a subject, a display name (From, To) or a custom header value holding "=?"
// is sent encoded, so no reader decodes it into other text, such as the U+202E that admission
// refuses when sent plainly (INTERFACE-DECISIONS "Characters in header fields"). Through
// POST /v1/emails to the outbox .eml, DKIM checked by mailauth, read back by postal-mime.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import PostalMime, { decodeWords } from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createTemplate } from '../apps/services/templates/templates.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';

interface Context { t: TestApp; tenant: DeliveryTenant; dns: TestDnsServer }
const test = suite<Context>('encoded words in header text');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns = await startDnsServer(ctx.tenant.zone);
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

async function post(ctx: Context, extra: Record<string, unknown>) {
  return ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` },
    payload: { from: `app@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'Hello', text: 'Hi Ann', ...extra },
  });
}

test('the refused character, sent plainly, is refused (the rule this is about)', async (ctx) => {
  const response = await post(ctx, { subject: 'Invoice \u202Efdp.exe' });
  assert.is(response.statusCode, 400, response.body);
});

test('a subject, display names and a custom header value written as encoded words: each reads exactly as written', async (ctx) => {
  const subject = 'Invoice =?UTF-8?Q?=E2=80=AEfdp.exe?=';
  const fromName = '=?UTF-8?Q?Support=E2=80=AE?=';
  const toName = 'Ann =?UTF-8?B?4oCu?= Müller';
  const note = 'see =?utf-8?q?=E2=80=AE?= and =?UTF-8?X?broken?=';
  const response = await post(ctx, {
    subject,
    from: `${fromName} <app@${ctx.tenant.domain}>`,
    to: `"${toName}" <ann@example.org>`,
    headers: { 'X-Note': note },
  });
  assert.is(response.statusCode, 202, response.body);
  const id = response.json().id as string;
  await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const raw = readFileSync(join(ctx.t.config.dataDir, 'outbox', `${id}.eml`));
  const [verdict] = await dkimResults(ctx.dns, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  const email = await PostalMime.parse(raw);
  assert.is(email.subject, subject);
  assert.equal(email.from, { address: `app@${ctx.tenant.domain}`, name: fromName });
  assert.equal(email.to, [{ address: 'ann@example.org', name: toName }]);
  assert.equal(email.headers.filter((h) => h.key === 'x-note').map((h) => decodeWords(h.value)), [note]);
  assert.not.match(raw.toString('latin1').slice(0, raw.indexOf('\r\n\r\n')), /[^\x00-\x7f]/, 'the header is 7-bit');
});

test('a template subject, as written and as rendered, holding encoded words: it reads exactly as rendered', async (ctx) => {
  const { t, tenant } = ctx;
  await createTemplate(t.ctx.documents, t.ctx.services.templates.of(tenant.workspaceId), tenant.projectId, {
    name: 'Encoded', slug: 'encoded', subject: '=?UTF-8?B?4oCu?= Re: {{topic}}', text: 'Hi',
  }, t.ctx.now());
  const response = await post(ctx, { subject: undefined, text: undefined, template: 'encoded', variables: { topic: '=?UTF-8?Q?=E2=80=AEtxt.exe?=' } });
  assert.is(response.statusCode, 202, response.body);
  const id = response.json().id as string;
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const email = await PostalMime.parse(readFileSync(join(t.config.dataDir, 'outbox', `${id}.eml`)));
  assert.is(email.subject, '=?UTF-8?B?4oCu?= Re: =?UTF-8?Q?=E2=80=AEtxt.exe?=');
});

test.run();
