// A recipient domain's `_smtp._tls` TXT record, read by the daily TLS report pass
// (sendTlsReports, run by the sender process). Its owner writes it, and one TXT record holds
// close to 64 KiB (over TCP): a rua entry of 64,000 "@" took the pass ~2 s of the event loop
// (/^mailto:([^?\s]+@[^?\s]+)$/i backtracks quadratically on it), per domain and report day.
// Driven through sendTlsReports: real document store, DNS cache against the test DNS server.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';
import { longestStall } from './support/event-loop.ts';

const test = suite<TlsReportDay>('_smtp._tls records of any size');

const RECORD = 'v=TLSRPTv1; rua=mailto:' + '@'.repeat(64_000) + '?';

test.before(async (ctx) => {
  Object.assign(ctx, await startTlsReportDay(RECORD));
});

test.after(async (ctx) => {
  await closeTlsReportDay(ctx);
});

test('given a _smtp._tls record whose rua is 64,000 "@", when the day\'s reports are sent, then it names no destination and the pass does not block the event loop', async (ctx) => {
  const transport = { name: 'capture', send: async () => { throw new Error('no mail expected'); }, close: async () => {} } as unknown as MailTransport;
  const errors: Error[] = [];
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 2000 })), transport, secrets: null as never,
    from: 'tlsrpt@relay-ops.test', egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set() },
    now: () => new Date(Date.parse(`${DAY}T00:00:00Z`) + 90_000_000), onError: (error: Error) => { errors.push(error); },
  };
  const { result: done, stallMs } = await longestStall(() => sendTlsReports(deps, DAY), 5);
  assert.equal(errors.map((e) => e.message), []);
  assert.ok(ctx.dns.queries.some((q) => q.name === '_smtp._tls.partner.test' && q.transport === 'tcp'), 'the record came over TCP');
  assert.equal(done.map((r) => [r.domain, r.status]), [['partner.test', 'no_destination']]);
  assert.ok(stallMs < 250, `the report pass blocked the event loop for ${Math.round(stallMs)} ms in one go`);
});

test.run();
