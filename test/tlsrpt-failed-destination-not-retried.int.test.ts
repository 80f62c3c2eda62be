// Defect: when a report has several rua destinations and one of them fails, the failed one is
// never tried again as soon as any other destination took the report. The report as a whole is
// marked `sent` when one destination accepted it, and later passes skip a `sent` report, so a
// rua HTTPS collector that answered 503 for a moment loses that day's report for good.
//
// Why it matters: RFC 8460 5.5: "In the event of a delivery failure, regardless of the delivery
// method, a sender SHOULD attempt redelivery for up to 24 hours after the initial attempt." A
// domain lists several destinations to get its reports into each of them (its own collector,
// a reporting vendor); a failure at one of them is a delivery failure to that destination,
// which Relay's own retry machinery (hourly passes, up to 48 attempts) exists to cover.
//
// Correct behaviour: the pass an hour later posts the report again to the destination that
// failed (and not to the one that already has it).
//
// Through real interfaces: sendTlsReports with a real document store, the real DNS cache against
// the test DNS server, and the real HTTPS egress posting to a real HTTPS server on loopback.
import { createServer, type Server } from 'node:https';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';

interface Context extends TlsReportDay { ca: TestCa; server: Server; port: number; posts: Array<{ path: string; status: number }> }

const test = suite<Context>('TLS reports: a destination that failed');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  const cert = ctx.ca.issue(['localhost']);
  ctx.posts = [];
  ctx.server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '/';
      // /down is unavailable the first time it is asked, then fine.
      const status = path === '/down' && !ctx.posts.some((p) => p.path === '/down') ? 503 : 200;
      ctx.posts.push({ path, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', () => resolve()));
  ctx.port = (ctx.server.address() as { port: number }).port;
  const record = `v=TLSRPTv1; rua=https://localhost:${ctx.port}/up,https://localhost:${ctx.port}/down`;
  Object.assign(ctx, await startTlsReportDay(record));
});

test.after(async (ctx) => {
  ctx.server?.closeAllConnections();
  await new Promise<void>((resolve) => (ctx.server ? ctx.server.close(() => resolve()) : resolve()));
  ctx.ca?.remove();
  await closeTlsReportDay(ctx);
});

test('a destination that answered 503 gets the report on the next hourly pass, although another destination took it', async (ctx) => {
  const unused = { name: 'unused', send: async () => { throw new Error('no mailto here'); }, close: async () => {} } as unknown as MailTransport;
  let now = Date.parse(`${DAY}T00:00:00Z`) + 86_400_000 + 3_600_000;
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport: unused, secrets: null as never,
    from: null, egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set([`localhost:${ctx.port}`]) },
    now: () => new Date(now), onError: (error: Error) => { throw error; },
  };
  await sendTlsReports(deps, DAY);
  assert.equal(ctx.posts, [{ path: '/up', status: 200 }, { path: '/down', status: 503 }], 'the first pass posts to both');
  now += 3_600_000; // the next hourly pass
  const second = await sendTlsReports(deps, DAY);
  const down = ctx.posts.filter((p) => p.path === '/down');
  assert.is(down.length, 2, `the destination that failed was not tried again (second pass: ${JSON.stringify(second.map((r) => [r.status, r.results]))})`);
  assert.is(down[1].status, 200);
  assert.is(ctx.posts.filter((p) => p.path === '/up').length, 1, 'the destination that has the report does not get it twice');
});

test.run();
