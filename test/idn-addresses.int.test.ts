// Addresses whose domain is written in Unicode (IDNA U-labels, RFC 5890/5891): `kunde@münchen.example`
// is a valid address, needs no SMTPUTF8 once its domain is in ASCII form, and is how people type
// it. Pins: POST /v1/emails accepts a From and a To written so (the sender's own registered
// domain `bücher.example` among them, which the management API stores as xn--bcher-kva.example)
// and converts the domain to its ASCII form, which the composed message's headers (custom
// mailbox headers such as Sender among them) and envelope, the email read back, and the
// suppression list see; the list's domain=, sender= and recipient= filters written in Unicode
// find it. A malformed xn-- label is refused with 400 validation_error, as the sending-domain
// rules refuse it, and a non-ASCII local part with its own reason (Relay does not send
// SMTPUTF8). A TLS-RPT rua mailto at a Unicode domain and RELAY_TLSRPT_FROM at one are used in
// their ASCII form too.
// Sends go through the real API to the outbox transport; the TLS report through sendTlsReports
// (real document store, DNS cache against the test DNS server).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { addSuppression } from '../apps/services/management/suppressions.ts';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { loadConfig } from '../infra/config.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';

interface Context { t: TestApp; tenant: DeliveryTenant; dns: TestDnsServer }
const test = suite<Context>('addresses at Unicode (IDN) domains');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t, 'bücher.example');
  ctx.dns = await startDnsServer(ctx.tenant.zone);
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

const post = (ctx: Context, body: Record<string, unknown>) => ctx.t.app.inject({
  method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` }, payload: { subject: 'Bestellung', text: 'Danke', ...body },
});
const list = async (ctx: Context, query: string): Promise<string[]> => {
  const response = await ctx.t.app.inject({ method: 'GET', url: `/v1/emails?${query}`, headers: { authorization: `Bearer ${ctx.tenant.key}` } });
  assert.is(response.statusCode, 200, response.body);
  return (response.json().emails as Array<{ id: string }>).map((e) => e.id).sort();
};
const outbox = (ctx: Context, id: string, suffix: string) => readFileSync(join(ctx.t.config.dataDir, 'outbox', `${id}${suffix}`));

/** Ids of the emails sent so far by the tests below, for the filter test. */
const sent: string[] = [];

test('the domain registered as bücher.example is stored as its A-label, and sends from the A-label form work (control)', async (ctx) => {
  const [domain] = await ctx.t.ctx.documents.collection<{ _id: string; name: string }>('domains').find({ where: {}, limit: 1 });
  assert.is(domain.name, 'xn--bcher-kva.example');
  const response = await post(ctx, { from: 'Shop <info@xn--bcher-kva.example>', to: 'kunde@xn--mnchen-3ya.example' });
  assert.is(response.statusCode, 202, response.body);
  sent.push(response.json().id);
});

test('given From and To at Unicode domains, when sent, then the message goes out with their ASCII form in its headers and envelope, DKIM passing', async (ctx) => {
  const response = await post(ctx, {
    from: 'Shop <info@Bücher.example>', to: ['Kunde <kunde@münchen.example>', 'b@zürich.example'], reply_to: 'Hilfe <hilfe@bücher.example>',
    headers: { Sender: 'Versand <versand@bücher.example>', 'Mail-Followup-To': 'Liste <liste@münchen.example>, c@zürich.example' },
  });
  assert.is(response.statusCode, 202, `${response.body}: the sender's own registered domain and valid IDN recipients are refused`);
  const id = response.json().id as string;
  sent.push(id);
  await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const raw = outbox(ctx, id, '.eml');
  const [verdict] = await dkimResults(ctx.dns, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  const email = await PostalMime.parse(raw);
  assert.equal([email.from?.name, (email.from as { address: string }).address], ['Shop', 'info@xn--bcher-kva.example']);
  assert.equal(email.to?.map((a) => (a as { address: string }).address), ['kunde@xn--mnchen-3ya.example', 'b@xn--zrich-kva.example']);
  assert.equal(email.replyTo?.map((a) => (a as { address: string }).address), ['hilfe@xn--bcher-kva.example']);
  assert.equal(email.sender, { name: 'Versand', address: 'versand@xn--bcher-kva.example' });
  assert.match(email.messageId ?? '', /@xn--bcher-kva\.example>$/);
  const headers = raw.toString('latin1').slice(0, raw.indexOf('\r\n\r\n'));
  assert.match(headers, /\r\nFrom: Shop <info@xn--bcher-kva\.example>\r\n/);
  assert.match(headers, /\r\nMail-Followup-To: Liste <liste@xn--mnchen-3ya\.example>,\s+c@xn--zrich-kva\.example\r\n/);
  assert.not.match(headers, /[^\x00-\x7f]/, 'the header holds 8-bit text');
  const envelopes = JSON.parse(outbox(ctx, id, '.envelope.json').toString('utf8')) as Array<{ mailFrom: string; recipients: string[] }>;
  assert.equal(envelopes.flatMap((e) => e.recipients).sort(), ['b@xn--zrich-kva.example', 'kunde@xn--mnchen-3ya.example']);
  for (const envelope of envelopes) assert.match(envelope.mailFrom, /@[a-z0-9-]+\.xn--bcher-kva\.example$/, 'the return path is at the sending domain');
});

test('given an email sent to and from Unicode domains, when read back, then it shows their ASCII form', async (ctx) => {
  const response = await post(ctx, { from: 'info@bücher.example', to: 'Kunde <kunde@münchen.example>' });
  assert.is(response.statusCode, 202, response.body);
  const id = response.json().id as string;
  sent.push(id);
  const detail = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  assert.is(detail.fromAddress, 'info@xn--bcher-kva.example');
  assert.equal(detail.to, ['Kunde <kunde@xn--mnchen-3ya.example>']);
  assert.equal(detail.recipients.map((r: { address: string }) => r.address), ['kunde@xn--mnchen-3ya.example']);
});

test('given emails from bücher.example, when listed with domain=, sender= or recipient= written in Unicode, then they are found', async (ctx) => {
  await waitUntil(async () => (await list(ctx, 'domain=xn--bcher-kva.example')).length === sent.length, 'every email is listed under its ASCII domain', 10_000);
  const all = [...sent].sort();
  assert.equal(await list(ctx, 'domain=xn--bcher-kva.example'), all);
  assert.equal(await list(ctx, `domain=${encodeURIComponent('Bücher.Example.')}`), all);
  assert.equal(await list(ctx, `sender=${encodeURIComponent('info@bücher.example')}`), all);
  assert.equal(await list(ctx, `recipient=${encodeURIComponent('Kunde@München.example')}`), all);
  assert.equal(await list(ctx, `domain=${encodeURIComponent('münchen.example')}`), [], 'another domain finds none');
});

test('given an address suppressed as written in Unicode, when a send names it in either form, then the send is suppressed', async (ctx) => {
  const entry = await addSuppression(ctx.t.ctx, ctx.tenant.workspaceId, 'Sperre@Zürich.example', ctx.t.ctx.now(), { kind: 'user', userId: 'usr_idn' });
  assert.is(entry.address, 'sperre@xn--zrich-kva.example');
  for (const to of ['sperre@zürich.example', 'Sperre <SPERRE@xn--zrich-kva.example>']) {
    const response = await post(ctx, { from: 'info@bücher.example', to });
    assert.is(response.statusCode, 202, response.body);
    assert.is(response.json().status, 'suppressed', `${to}: ${response.body}`);
  }
});

test('given a malformed xn-- label or a non-ASCII local part, then 400 validation_error in the error envelope, each with its reason', async (ctx) => {
  const refusals: Array<[Record<string, unknown>, string]> = [
    [{ from: 'info@bücher.example', to: 'kunde@xn--zz.example' }, 'body.to: has an invalid domain: label "xn--zz" is not valid punycode'],
    [{ from: 'info@bücher.example', to: ['a@münchen.example', 'b@XN--ZZ.example'] }, 'body.to[1]: has an invalid domain: label "xn--zz" is not valid punycode'],
    [{ from: 'info@bücher.example', to: 'jürgen@münchen.example' }, 'body.to: has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8)'],
    [{ from: 'info@bücher.example', to: 'kunde@bü/cher.example' }, 'body.to: has an invalid domain: not a valid internationalised domain name'],
  ];
  for (const [body, message] of refusals) {
    const response = await post(ctx, body);
    assert.is(response.statusCode, 400, response.body);
    assert.equal(response.json(), { error: { code: 'validation_error', message } });
  }
});

test.run();

const tls = suite<TlsReportDay>('TLS reports at Unicode domains');

// RFC 6068: a mailto URI carries a non-ASCII domain percent-encoded as UTF-8.
tls.before(async (ctx) => {
  Object.assign(ctx, await startTlsReportDay('v=TLSRPTv1; rua=mailto:tls@berichte.m%C3%BCnchen.test', 'xn--relay-ps-s4a.test'));
});

tls.after(async (ctx) => {
  await closeTlsReportDay(ctx);
});

tls('given RELAY_TLSRPT_FROM at a Unicode domain, then the configuration holds its ASCII form', () => {
  assert.is(loadConfig({ RELAY_TLSRPT_FROM: 'tlsrpt@relay-öps.test' }).tlsRptFrom, 'tlsrpt@xn--relay-ps-s4a.test');
});

tls('given a rua mailto and a sender at Unicode domains, when the day\'s report is sent, then it goes by mail in their ASCII form, signed by the sender\'s domain', async (ctx) => {
  const mails: Array<{ raw: Buffer; mailFrom: string; recipients: string[] }> = [];
  const transport = {
    name: 'capture',
    send: async (message: { raw: Buffer; envelope: { mailFrom: string; recipients: string[] } }) => {
      mails.push({ raw: message.raw, mailFrom: message.envelope.mailFrom, recipients: message.envelope.recipients });
      return { recipients: message.envelope.recipients.map((address) => ({ address, result: 'accepted', smtpCode: 250, enhancedCode: null, response: '250 ok' })), providerMessageId: null };
    },
    close: async () => {},
  } as unknown as MailTransport;
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport, secrets: null as never,
    from: 'tlsrpt@relay-öps.test', egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set() },
    now: () => new Date(Date.parse(`${DAY}T00:00:00Z`) + 90_000_000), onError: (error: Error) => { throw error; },
  };
  const [report] = await sendTlsReports(deps, DAY);
  assert.is(report?.status, 'sent', JSON.stringify(report?.results));
  assert.is(mails.length, 1, 'one report mail');
  const [{ raw, mailFrom, recipients }] = mails;
  assert.equal([mailFrom, recipients], ['tlsrpt@xn--relay-ps-s4a.test', ['tls@berichte.xn--mnchen-3ya.test']]);
  const [verdict] = (await dkimVerify(raw, { resolver: async () => [[`v=DKIM1; k=rsa; p=${ctx.key.publicKeyBase64}`]] })).results;
  assert.is(verdict.status.result, 'pass', verdict.info);
  assert.is(verdict.signingDomain, 'xn--relay-ps-s4a.test');
  const email = await PostalMime.parse(raw);
  assert.is((email.from as { address: string }).address, 'tlsrpt@xn--relay-ps-s4a.test');
  assert.equal(email.to?.map((a) => (a as { address: string }).address), ['tls@berichte.xn--mnchen-3ya.test']);
});

tls.run();
