// A day's TLS report waits a few minutes after the day ends: each sender instance adds its
// session counts to the store only every 10 s, so a pass just after 00:00 UTC would send
// yesterday's report short of the sessions other instances still hold, and a sent report is
// never sent again. The pass at 00:00:05 reports the days before; yesterday's goes with a pass
// once the counts are in.
//
// Through real interfaces: startTlsReporting (its passes every few ms here) with a real document
// store, the DNS cache against the test DNS server and the HTTPS egress posting to a real HTTPS
// server on loopback. The pass is known to have looked at yesterday when it sent the report of
// the day before, which comes after yesterday in its order.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTlsReporting, tlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes, TlsSessionCounter } from '../apps/services/tls-reports/session-counts.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';

interface Context { ca: TestCa; receiver: HttpsReceiver; dns: TestDnsServer; dir: string; documents: SqliteDocumentStore; now: number }

const YESTERDAY = '2031-06-10';
const BEFORE = '2031-06-09';
const TURN = Date.parse('2031-06-11T00:00:00Z');
const test = suite<Context>('TLS reports: a day is reported once its counts are in');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  ctx.dns = await startDnsServer(['yesterday.test', 'before.test'].map((domain) => (
    { name: `_smtp._tls.${domain}`, type: 'TXT' as const, data: `v=TLSRPTv1; rua=https://localhost:${ctx.receiver.port}/${domain}` }
  )));
  ctx.dir = mkdtempSync(join(tmpdir(), 'tlsrpt-settle-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  await ensureTlsSessionCountIndexes(ctx.documents);
  const counter = new TlsSessionCounter(ctx.documents);
  for (const [domain, at] of [['yesterday.test', `${YESTERDAY}T23:59:58Z`], ['before.test', `${BEFORE}T12:00:00Z`]]) {
    counter.record({ recipientDomain: domain, policy: { type: 'no-policy-found', domain, strings: [], mxHosts: [] }, result: 'success', mxHost: `mx.${domain}`, at: new Date(at) });
  }
  await counter.close();
});

test.after(async (ctx) => {
  await ctx.receiver.close();
  await ctx.dns.close();
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
  ctx.ca.remove();
});

function deps(ctx: Context): TlsReportingDeps {
  return {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 })),
    transport: { name: 'unused', send: async () => { throw new Error('no mailto here'); }, close: async () => {} } as unknown as MailTransport,
    secrets: null as never, from: null, egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set([`localhost:${ctx.receiver.port}`]) },
    now: () => new Date(ctx.now), onError: (error) => { throw error; }, onWarning: () => {},
  };
}

const report = (ctx: Context, day: string, domain: string) => tlsReports(ctx.documents).get(`${day}|${domain}`);

async function passesUntilSent(ctx: Context, day: string, domain: string): Promise<void> {
  const reporting = startTlsReporting(deps(ctx), 20);
  try {
    await waitUntil(async () => (await report(ctx, day, domain))?.status === 'sent', `the report of ${domain} (${day}) is sent`, 5000);
  } finally {
    await reporting.stop();
  }
}

test('at 00:00:05 UTC yesterday is not reported yet (the days before are); a pass five minutes into the day reports it', async (ctx) => {
  ctx.now = TURN + 5000;
  await passesUntilSent(ctx, BEFORE, 'before.test');
  assert.is(await report(ctx, YESTERDAY, 'yesterday.test'), null, 'yesterday was not claimed');
  assert.equal(ctx.receiver.requests.map((r) => r.path), ['/before.test']);

  ctx.now = TURN + 5 * 60_000;
  await passesUntilSent(ctx, YESTERDAY, 'yesterday.test');
  assert.equal(ctx.receiver.requests.map((r) => r.path), ['/before.test', '/yesterday.test']);
});

test.run();
