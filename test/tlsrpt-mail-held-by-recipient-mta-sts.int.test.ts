// Defect: a TLS report mailed to a rua domain whose MX fails that domain's own MTA-STS policy is
// never delivered. The report mail goes to the mx transport like any other mail, and the
// transport applies the rua domain's MTA-STS policy in `enforce` mode: an MX whose certificate
// does not name it is refused before MAIL FROM, the report is deferred, and every hourly retry
// ends the same way until the report is given up.
//
// Why it matters: a broken MX certificate under an enforced policy is exactly the failure TLS
// reports exist to tell the domain about, and the domain's report mailbox often sits behind the
// same MX. RFC 8460 5.3.1 says so in as many words: "when sending failure reports via SMTP,
// Sending MTAs MUST NOT honor MTA-STS or DANE TLSA failures."
//
// Correct behaviour: the report mail is delivered (opportunistic TLS, the certificate problem
// ignored) and the report is `sent`.
//
// Through real interfaces: sendTlsReports with a real document store, the real mx transport and
// MTA-STS resolver, the test DNS server, a real HTTPS policy host and a real SMTP sink whose
// certificate (from a test CA) does not name the rua domain's MX.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';

interface Context extends TlsReportDay { ca: TestCa; sink: SmtpSink; policies: PolicyServer; transport: MxTransport }

const RECORD = 'v=TLSRPTv1; rua=mailto:tlsrpt@reports.test';
const test = suite<Context>('TLS report mail under the rua domain\'s MTA-STS');

test.before(async (ctx) => {
  Object.assign(ctx, await startTlsReportDay(RECORD));
  ctx.ca = makeTestCa();
  // The rua domain's MX presents a certificate for another name: the failure to be reported.
  const mxCert = ctx.ca.issue(['mx.elsewhere.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.reports.test']));
  ctx.policies.policies.set('reports.test', policyText('enforce', ['mx.reports.test']));
  ctx.dns.setZone([
    { name: '_smtp._tls.partner.test', type: 'TXT', data: RECORD },
    { name: 'reports.test', type: 'MX', data: { preference: 10, exchange: 'mx.reports.test' } },
    { name: 'mx.reports.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.reports.test', type: 'TXT', data: 'v=STSv1; id=20310401' },
    { name: 'mta-sts.reports.test', type: 'A', data: '127.0.0.1' },
  ]);
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1']);
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000 }),
  });
});

test.after(async (ctx) => {
  await ctx.transport?.close();
  await ctx.sink?.close();
  await ctx.policies?.close();
  ctx.ca?.remove();
  await closeTlsReportDay(ctx);
});

test('a report mailed to a domain whose MX fails its enforced MTA-STS policy is still delivered (RFC 8460 5.3.1)', async (ctx) => {
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport: ctx.transport, secrets: null as never,
    from: 'tlsrpt@relay-ops.test', egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set() },
    now: () => new Date(Date.parse(`${DAY}T00:00:00Z`) + 90_000_000), onError: (error: Error) => { throw error; },
  };
  const done = await sendTlsReports(deps, DAY);
  assert.is(done.length, 1);
  assert.is(done[0].status, 'sent', `the report was not delivered: ${done[0].results.join(' | ')}`);
  assert.is(ctx.sink.messages.length, 1);
  assert.equal(ctx.sink.messages[0].rcptTo.map((r) => r.address), ['tlsrpt@reports.test']);
});

test.run();
