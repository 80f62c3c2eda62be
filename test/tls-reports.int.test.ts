// TLS reporting (RFC 8460), end to end: mail sent through the API is delivered by the mx
// transport under a recipient domain's MTA-STS policy (one of its MX hosts presents a
// certificate that does not name it), every session's outcome is counted, and the day's
// report is built and delivered to the domain's `_smtp._tls` rua: by mail to a test SMTP sink
// (DKIM-signed by RELAY_TLSRPT_FROM's domain, checked by mailauth) and by HTTPS POST. The
// gzipped JSON is validated with ajv against the RFC 8460 section 4 schema
// (test/fixtures/tlsrpt/rfc8460-report.schema.json).
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports } from '../apps/services/tls-reports/daily-reports.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  sink: SmtpSink;
  policies: PolicyServer;
  receiver: HttpsReceiver;
  t: TestApp;
  tenant: DeliveryTenant;
}

const schema = JSON.parse(readFileSync(new URL('./fixtures/tlsrpt/rfc8460-report.schema.json', import.meta.url), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: true });
(addFormats as unknown as (a: Ajv) => void)(ajv);
const validate = ajv.compile(schema);

const mx = (domain: string, exchange: string, preference: number): ZoneRecord => ({ name: domain, type: 'MX', data: { preference, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });

const test = suite<Context>('TLS reports');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  const mxCert = ctx.ca.issue(['mx.partner.test', 'mx.reports.test', 'mx.plain.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.partner.test']));
  ctx.policies.policies.set('partner.test', policyText('enforce', ['*.partner.test']));
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  ctx.dns = await startDnsServer([]);
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_MTA_STS_PORT: String(ctx.policies.port),
    RELAY_TLSRPT_FROM: 'tlsrpt@relay-ops.test',
    RELAY_WEBHOOK_ALLOW: `localhost:${ctx.receiver.port}`,
    RELAY_DELIVERY_RETRY_SCALE: '0.001',
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t, 'relay-ops.test');
  ctx.dns.setZone([
    ...ctx.tenant.zone,
    // partner.test: enforce; its preferred MX presents a certificate that does not name it.
    mx('partner.test', 'mx2.partner.test', 5), loopback('mx2.partner.test'),
    mx('partner.test', 'mx.partner.test', 10), loopback('mx.partner.test'),
    { name: '_mta-sts.partner.test', type: 'TXT', data: 'v=STSv1; id=20261127' }, loopback('mta-sts.partner.test'),
    { name: '_smtp._tls.partner.test', type: 'TXT', data: `v=TLSRPTv1; rua=mailto:tlsrpt@reports.test,https://localhost:${ctx.receiver.port}/tlsrpt` },
    // plain.test: no policy, no rua.
    mx('plain.test', 'mx.plain.test', 10), loopback('mx.plain.test'),
    // Where partner.test's reports go.
    mx('reports.test', 'mx.reports.test', 10), loopback('mx.reports.test'),
  ]);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.policies.close();
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

test('a day of sessions becomes an RFC 8460 report, valid against the schema, mailed (DKIM-signed) and posted to the rua, once', async (ctx) => {
  const { t, tenant } = ctx;
  const ids = [];
  for (const to of ['ann@partner.test', 'bob@partner.test', 'cy@plain.test']) {
    ids.push(await send(t, tenant.key, { from: `hello@${tenant.domain}`, to, subject: 'TLS', text: 'hello' }));
  }
  for (const id of ids) await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  const partnerMail = ctx.sink.messages.filter((m) => m.rcptTo.some((r) => r.address.endsWith('@partner.test')));
  assert.ok(partnerMail.every((m) => m.servername === 'mx.partner.test' && m.secure), 'enforced: only the MX the certificate names');

  const mxDelivery = t.ctx.services.mxDelivery()!;
  await mxDelivery.tlsSessions.flush();
  const day = new Date().toISOString().slice(0, 10);
  const deps = {
    documents: t.stores.documents, dns: mxDelivery.dns, transport: t.ctx.services.transport(), secrets: t.ctx.services.secrets, from: t.config.tlsRptFrom, egress: t.ctx.services.egress,
    https: { dnsServers: t.config.dnsServers, allow: t.config.webhookAllow }, now: () => new Date(), onError: (error: Error) => { throw error; },
  };
  const before = ctx.sink.messages.length;
  const done = await sendTlsReports(deps, day);
  assert.equal(done.map((r) => [r.domain, r.status]).sort(), [['partner.test', 'sent'], ['plain.test', 'no_destination']]);

  // By mail.
  const reports = ctx.sink.messages.slice(before);
  assert.is(reports.length, 1);
  assert.equal(reports[0].rcptTo.map((r) => r.address), ['tlsrpt@reports.test']);
  const [dkim] = await dkimResults(ctx.dns, reports[0].raw);
  assert.is(dkim.status.result, 'pass', dkim.info);
  assert.is(dkim.signingDomain, 'relay-ops.test');
  const parsed = await PostalMime.parse(reports[0].raw);
  const header = (name: string) => parsed.headers.find((h) => h.key === name)?.value;
  assert.match(header('content-type') ?? '', /^multipart\/report;\s*report-type="?tlsrpt"?/);
  assert.is(header('tls-report-domain'), 'partner.test');
  assert.is(header('tls-report-submitter'), 'relay-ops.test');
  assert.match(parsed.subject ?? '', /^Report Domain: partner\.test Submitter: relay-ops\.test Report-ID: </);
  const attachment = parsed.attachments.find((a) => a.mimeType === 'application/tlsrpt+gzip');
  assert.ok(attachment, 'the gzipped report');
  assert.match(attachment!.filename ?? '', /^relay-ops\.test!partner\.test!\d+!\d+!.+\.json\.gz$/);
  const report: any = JSON.parse(gunzipSync(Buffer.from(attachment!.content as ArrayBuffer)).toString('utf8'));
  const asSent: unknown = report;
  assert.ok(validate(asSent), JSON.stringify(validate.errors));

  assert.equal(report['date-range'], { 'start-datetime': `${day}T00:00:00Z`, 'end-datetime': `${day}T23:59:59Z` });
  assert.is(report['contact-info'], 'tlsrpt@relay-ops.test');
  assert.is(report.policies.length, 1);
  const [policy] = report.policies;
  assert.equal(policy.policy['policy-type'], 'sts');
  assert.equal(policy.policy['policy-domain'], 'partner.test');
  assert.equal(policy.policy['mx-host'], ['*.partner.test']);
  assert.ok(policy.policy['policy-string'].includes('mode: enforce'));
  assert.ok(policy.summary['total-successful-session-count'] >= 1);
  // Each of the two messages tried the preferred MX first: two refused sessions, one line.
  assert.is(policy.summary['total-failure-session-count'], 2);
  assert.equal(policy['failure-details'].map((f: any) => [f['result-type'], f['receiving-mx-hostname'], f['receiving-ip'], f['failed-session-count']]), [
    ['certificate-host-mismatch', 'mx2.partner.test', '127.0.0.1', 2],
  ]);

  // By HTTPS, the same report.
  const posted = ctx.receiver.requests.filter((r) => r.path === '/tlsrpt');
  assert.is(posted.length, 1);
  assert.is(posted[0].headers['content-type'], 'application/tlsrpt+gzip');

  // Claimed: a second pass sends nothing.
  assert.equal(await sendTlsReports(deps, day), []);
  assert.is(ctx.sink.messages.length, before + 1);
});

test.run();
