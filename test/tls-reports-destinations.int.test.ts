// A TLS report's document (`tls_reports`) keeps which of its destinations have it: the report
// stays due until each has it (RFC 8460 5.5: a delivery failure is retried), and a retry goes
// only to those that lack it, by HTTPS and by mail alike; a claim taken over from an instance
// that stopped after one destination does not send that one the report again. Documents written
// before destinations were kept are read as before: `failed`, no destination has it; `sent`,
// settled.
//
// Through real interfaces: sendTlsReports with a real document store, the DNS cache against the
// test DNS server, the HTTPS egress posting to a real HTTPS server on loopback, and for mailto the
// real mx transport delivering to a real SMTP server.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, tlsReports, type TlsReportDoc, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';

interface Context extends TlsReportDay { ca: TestCa; receiver: HttpsReceiver; sink: SmtpSink; transport: MxTransport; now: number }

const ID = `${DAY}|partner.test`;
const test = suite<Context>('TLS reports: each destination until it has the report');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  ctx.sink = await startSmtpSink({
    // b@reports.test's mailbox is unavailable for its first delivery.
    onRcptTo: (address) => (address.address === 'b@reports.test' && !ctx.sink.rcptCommands.slice(0, -1).some((r) => r.address === 'b@reports.test') ? smtpError(451, '4.2.1 try later') : undefined),
  });
});

test.before.each(async (ctx) => {
  Object.assign(ctx, await startTlsReportDay('v=TLSRPTv1; rua=mailto:nobody@nowhere.test'));
  ctx.receiver.requests.length = 0;
  ctx.receiver.answer = () => ({ status: 200 });
  ctx.sink.messages.length = 0;
  ctx.sink.rcptCommands.length = 0;
  ctx.now = Date.parse(`${DAY}T00:00:00Z`) + 86_400_000 + 3_600_000;
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  ctx.transport = new MxTransport({ dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses: new Set(['127.0.0.1']) });
});

test.after.each(async (ctx) => {
  await ctx.transport.close();
  await closeTlsReportDay(ctx);
});

test.after(async (ctx) => {
  await ctx.receiver.close();
  await ctx.sink.close();
  ctx.ca.remove();
});

function rua(ctx: Context, destinations: string[]): void {
  const uris = destinations.map((d) => (d.startsWith('/') ? `https://localhost:${ctx.receiver.port}${d}` : `mailto:${d}`));
  ctx.dns.setZone([
    { name: '_smtp._tls.partner.test', type: 'TXT', data: `v=TLSRPTv1; rua=${uris.join(',')}` },
    { name: 'reports.test', type: 'MX', data: { preference: 10, exchange: 'mx.reports.test' } },
    { name: 'mx.reports.test', type: 'A', data: '127.0.0.1' },
  ]);
}

function deps(ctx: Context, transport: MailTransport = ctx.transport): TlsReportingDeps {
  return {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 })), transport, secrets: null as never,
    from: 'tlsrpt@relay-ops.test', egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set([`localhost:${ctx.receiver.port}`]) },
    now: () => new Date(ctx.now), onError: (error: Error) => { throw error; },
  };
}

const url = (ctx: Context, path: string) => `https://localhost:${ctx.receiver.port}${path}`;
const posted = (ctx: Context) => ctx.receiver.requests.map((r) => r.path);
/** A report document as a sender before per-destination outcomes wrote it. */
const older = (status: TlsReportDoc['status'], updatedAt: string): TlsReportDoc =>
  ({ _id: ID, day: DAY, domain: 'partner.test', reportId: 'r', status, attempts: 1, results: ['…: http_error'], updatedAt });

test('HTTPS: a destination that failed is posted to on the next pass, the other is not; partial, then sent', async (ctx) => {
  rua(ctx, ['/one', '/two']);
  ctx.receiver.answer = (request) => ({ status: request.path === '/two' && !ctx.receiver.requests.slice(0, -1).some((r) => r.path === '/two') ? 503 : 200 });
  const [first] = await sendTlsReports(deps(ctx), DAY);
  assert.is(first.status, 'partial');
  assert.equal(first.destinations, [{ to: url(ctx, '/one'), delivered: true }, { to: url(ctx, '/two'), delivered: false }]);
  ctx.now += 3_600_000;
  const [second] = await sendTlsReports(deps(ctx), DAY);
  assert.is(second.status, 'sent');
  assert.equal(second.destinations, [{ to: url(ctx, '/one'), delivered: true }, { to: url(ctx, '/two'), delivered: true }]);
  assert.equal(posted(ctx), ['/one', '/two', '/two']);
  ctx.now += 3_600_000;
  assert.equal(await sendTlsReports(deps(ctx), DAY), [], 'settled');
  assert.equal(posted(ctx), ['/one', '/two', '/two']);
});

test('mail: the next pass mails the report to the recipient that deferred it, alone', async (ctx) => {
  rua(ctx, ['a@reports.test', 'b@reports.test']);
  const [first] = await sendTlsReports(deps(ctx), DAY);
  assert.is(first.status, 'partial', first.results.join(' | '));
  assert.equal(ctx.sink.messages.map((m) => m.rcptTo.map((r) => r.address)), [['a@reports.test']]);
  ctx.now += 3_600_000;
  const [second] = await sendTlsReports(deps(ctx), DAY);
  assert.is(second.status, 'sent', second.results.join(' | '));
  assert.equal(ctx.sink.messages.map((m) => m.rcptTo.map((r) => r.address)), [['a@reports.test'], ['b@reports.test']]);
  assert.match(ctx.sink.messages[1].raw.toString('utf8'), /^To: b@reports\.test\r$/m, 'the mail names only whom it is for');
});

test('a claim an instance left after its first destination took the report: taken over, the other destination only', async (ctx) => {
  rua(ctx, ['/one', '/two']);
  await tlsReports(ctx.documents).insert({ ...older('sending', new Date(ctx.now - 3 * 3_600_000).toISOString()), destinations: [{ to: url(ctx, '/one'), delivered: true }] });
  const [report] = await sendTlsReports(deps(ctx), DAY);
  assert.equal([report.status, report.attempts], ['sent', 2]);
  assert.equal(posted(ctx), ['/two']);
});

test('written before destinations were kept: a failed report goes to each destination; a sent one to none', async (ctx) => {
  rua(ctx, ['/one', '/two']);
  await tlsReports(ctx.documents).insert(older('failed', new Date(ctx.now - 3_600_000).toISOString()));
  const [report] = await sendTlsReports(deps(ctx), DAY);
  assert.is(report.status, 'sent');
  assert.equal(posted(ctx).sort(), ['/one', '/two']);

  const { _v, ...rest } = (await tlsReports(ctx.documents).get(ID))!;
  const { destinations: _, ...withoutDestinations } = rest;
  await tlsReports(ctx.documents).replace({ ...withoutDestinations, status: 'sent' }, _v);
  ctx.receiver.requests.length = 0;
  ctx.now += 3_600_000;
  assert.equal(await sendTlsReports(deps(ctx), DAY), []);
  assert.equal(posted(ctx), []);
});

test.run();
