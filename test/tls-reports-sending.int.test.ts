// How TLS reports (RFC 8460) are sent, through sendTlsReports and startTlsReporting with a real
// document store, the real DNS cache against the test DNS server, and the real HTTPS egress
// posting to a real HTTPS server on loopback (one that holds its replies when a test says so):
//  - a claim is refreshed after each destination and taken over as abandoned only when it was
//    not refreshed for long: a later pass (the next hour's, another instance's) leaves a report
//    still being sent alone, and a pass whose claim was taken over stops sending;
//  - one instance runs one pass at a time: a pass still sending makes the next one skip;
//  - a domain whose report throws is logged with its domain, marked failed, and the other
//    domains' reports are still sent;
//  - at most 5 rua destinations per report;
//  - `_smtp._tls` TXT records (RFC 8460 3): those not beginning with "v=TLSRPTv1;" are
//    discarded, and unless exactly one is left the domain does not implement TLSRPT.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, startTlsReporting, tlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes, TlsSessionCounter } from '../apps/services/tls-reports/session-counts.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';

interface Context {
  ca: TestCa; dns: TestDnsServer; server: Server; port: number; dir: string; documents: SqliteDocumentStore;
  posts: string[];
  /** Replies wait for this (resolved: at once). */
  gate: Promise<void>;
  /** Told of each post as it arrives. */
  onPost: ((url: string) => void) | null;
}
const test = suite<Context>('TLS reports: sending');
const DAYS = { slow: '2031-03-04', two: '2031-03-05', lost: '2031-03-06', boom: '2031-03-07', many: '2031-03-08', hold: '2031-03-09' };
const SESSIONS: Array<[string, string]> = [
  ['slow.test', DAYS.slow], ['two.test', DAYS.two], ['other.test', DAYS.two], ['lost.test', DAYS.lost],
  ['boom.test', DAYS.boom], ['fine.test', DAYS.boom], ['many.test', DAYS.many], ['hold.test', DAYS.hold],
];
/** The hour after the day's end, when its reports are due. */
const after = (day: string) => Date.parse(`${day}T00:00:00Z`) + 86_400_000 + 3_600_000;

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  const cert = ctx.ca.issue(['localhost']);
  ctx.posts = [];
  ctx.gate = Promise.resolve();
  ctx.onPost = null;
  ctx.server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    req.resume();
    req.on('end', () => {
      const url = req.url ?? '/';
      ctx.posts.push(url);
      ctx.onPost?.(url);
      void ctx.gate.then(() => res.writeHead(200).end('ok'));
    });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', () => resolve()));
  ctx.port = (ctx.server.address() as { port: number }).port;
  ctx.dns = await startDnsServer([]);
  ctx.dir = mkdtempSync(join(tmpdir(), 'tlsrpt-sending-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  await ensureTlsSessionCountIndexes(ctx.documents);
  const counter = new TlsSessionCounter(ctx.documents);
  for (const [domain, day] of SESSIONS) {
    counter.record({ recipientDomain: domain, policy: { type: 'no-policy-found', domain, strings: [], mxHosts: [] }, result: 'success', mxHost: `mx.${domain}`, at: new Date(`${day}T12:00:00Z`) });
  }
  await counter.close();
});

test.after(async (ctx) => {
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
  await ctx.dns.close();
  await ctx.documents.close?.();
  rmSync(ctx.dir, { recursive: true, force: true });
  ctx.ca.remove();
});

test.before.each((ctx) => {
  ctx.posts.length = 0;
  ctx.gate = Promise.resolve();
  ctx.onPost = null;
});

/** Replies are held until the returned deferred is resolved. */
function hold(ctx: Context): Deferred<void> {
  const gate = deferred();
  ctx.gate = gate.promise;
  return gate;
}

const rua = (ctx: Context, ...paths: string[]) => `v=TLSRPTv1; rua=${paths.map((p) => `https://localhost:${ctx.port}${p}`).join(',')}`;

function deps(ctx: Context, now: () => Date, overrides: Partial<TlsReportingDeps> = {}): TlsReportingDeps {
  const transport: MailTransport = { name: 'unused', send: async () => { throw new Error('no mailto in these tests'); }, close: async () => {} } as unknown as MailTransport;
  return {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport, secrets: null as never, from: null,
    egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set([`localhost:${ctx.port}`]) }, now, onError: (error: Error) => { throw error; },
    ...overrides,
  };
}

test('a report still being sent is not claimed and sent again by a later pass', async (ctx) => {
  ctx.dns.setZone([{ name: '_smtp._tls.slow.test', type: 'TXT', data: rua(ctx, '/slow') }]);
  const gate = hold(ctx);
  let now = after(DAYS.slow);
  const clock = () => new Date(now);
  const first = sendTlsReports(deps(ctx, clock), DAYS.slow);
  await waitUntil(() => ctx.posts.length === 1, 'the first pass posts the report');
  // The first pass is still waiting for the destination; the next pass comes along 31 min
  // later by the clock (an hourly pass, or another sender instance) and either ends or posts.
  now += 31 * 60_000;
  const posted = new Promise<string>((resolve) => { ctx.onPost = () => resolve('posted'); });
  const second = sendTlsReports(deps(ctx, clock), DAYS.slow);
  await Promise.race([second, posted]);
  gate.resolve();
  const [sent, again] = await Promise.all([first, second]);
  assert.equal(ctx.posts, ['/slow'], `the slow.test report was posted ${ctx.posts.length} times`);
  assert.is(sent.find((r) => r.domain === 'slow.test')?.status, 'sent');
  assert.equal(again, []);
});

test('a pass whose claim was taken over while it sent stops sending the report', async (ctx) => {
  ctx.dns.setZone([{ name: '_smtp._tls.lost.test', type: 'TXT', data: rua(ctx, '/lost1', '/lost2') }]);
  const gate = hold(ctx);
  const warnings: Array<Record<string, unknown>> = [];
  const pass = sendTlsReports(deps(ctx, () => new Date(after(DAYS.lost)), { onWarning: (_message, fields) => warnings.push(fields) }), DAYS.lost);
  await waitUntil(() => ctx.posts.length === 1, 'the pass posts to the first destination');
  // Another instance takes the claim over (as it would one it found abandoned).
  const reports = tlsReports(ctx.documents);
  const current = (await reports.get(`${DAYS.lost}|lost.test`))!;
  const { _v, ...rest } = current;
  assert.ok(await reports.replace({ ...rest, attempts: current.attempts + 1, updatedAt: new Date(after(DAYS.lost) + 60_000).toISOString() }, _v));
  gate.resolve();
  const done = await pass;
  assert.equal(ctx.posts, ['/lost1'], 'the second destination is left to the claim\'s new holder');
  assert.equal(done, []);
  assert.is(warnings.length, 1);
  assert.is(warnings[0].domain, 'lost.test');
  const after_ = (await reports.get(`${DAYS.lost}|lost.test`))!;
  assert.is(after_.status, 'sending', 'the new holder\'s claim is left as it is');
  assert.equal(after_.results, []);
});

test('a domain whose report throws is logged with its domain and marked failed; the next domain is still sent', async (ctx) => {
  ctx.dns.setZone([
    { name: '_smtp._tls.boom.test', type: 'TXT', data: rua(ctx, '/boom') },
    { name: '_smtp._tls.fine.test', type: 'TXT', data: rua(ctx, '/fine') },
  ]);
  const errors: Error[] = [];
  const egress = { ...webhookEgress, post: (post: Parameters<typeof webhookEgress.post>[0]) => (String(post.url).endsWith('/boom') ? Promise.reject(new Error('egress exploded')) : webhookEgress.post(post)) };
  const done = await sendTlsReports(deps(ctx, () => new Date(after(DAYS.boom)), { egress, onError: (error) => errors.push(error) }), DAYS.boom);
  assert.equal(done.map((r) => [r.domain, r.status]), [['fine.test', 'sent']]);
  assert.equal(ctx.posts, ['/fine']);
  assert.is(errors.length, 1);
  assert.match(errors[0].message, 'boom.test');
  assert.match(errors[0].message, 'egress exploded');
  const boom = (await tlsReports(ctx.documents).get(`${DAYS.boom}|boom.test`))!;
  assert.is(boom.status, 'failed', 'tried again on the next pass');
});

test('a rua with 7 destinations: the report goes to the first 5', async (ctx) => {
  const paths = Array.from({ length: 7 }, (_, i) => `/many${i}`);
  ctx.dns.setZone([{ name: '_smtp._tls.many.test', type: 'TXT', data: rua(ctx, ...paths) }]);
  const done = await sendTlsReports(deps(ctx, () => new Date(after(DAYS.many))), DAYS.many);
  assert.equal([...ctx.posts].sort(), paths.slice(0, 5));
  const many = done.find((r) => r.domain === 'many.test')!;
  assert.is(many.status, 'sent');
  assert.ok(many.results.some((r) => r.includes('2 rua destinations past the first 5 not used')), many.results.join('; '));
});

test('two v=TLSRPTv1 records at _smtp._tls: the domain does not implement TLSRPT (RFC 8460 3), nothing is posted; other TXT records are discarded', async (ctx) => {
  ctx.dns.setZone([
    { name: '_smtp._tls.two.test', type: 'TXT', data: rua(ctx, '/first') },
    { name: '_smtp._tls.two.test', type: 'TXT', data: rua(ctx, '/second') },
    { name: '_smtp._tls.other.test', type: 'TXT', data: 'v=spf1 -all' },
    { name: '_smtp._tls.other.test', type: 'TXT', data: rua(ctx, '/other') },
  ]);
  const done = await sendTlsReports(deps(ctx, () => new Date(after(DAYS.two))), DAYS.two);
  const two = done.find((r) => r.domain === 'two.test');
  assert.equal(ctx.posts, ['/other'], `posted to ${ctx.posts.join(', ')}`);
  assert.is(two?.status, 'no_destination');
  assert.match(two!.results.join(';'), '2 v=TLSRPTv1 records');
  assert.is(done.find((r) => r.domain === 'other.test')?.status, 'sent');
});

test('startTlsReporting: while a pass still sends, the next ones are skipped, not run alongside it', async (ctx) => {
  ctx.dns.setZone([{ name: '_smtp._tls.hold.test', type: 'TXT', data: rua(ctx, '/hold') }]);
  const gate = hold(ctx);
  const base = deps(ctx, () => new Date(after(DAYS.hold)));
  let lookups = 0;
  const dns = base.dns;
  const txt = dns.txt.bind(dns);
  dns.txt = (name: string) => {
    lookups++;
    return txt(name);
  };
  const skipped: string[] = [];
  const reporting = startTlsReporting({ ...base, dns, onWarning: (message) => skipped.push(message) }, 20);
  await waitUntil(() => ctx.posts.length === 1, 'the first pass posts the report');
  await waitUntil(() => skipped.length >= 3, 'three passes come along while the first still sends');
  assert.ok(skipped.every((m) => m.includes('previous pass still runs')), skipped.join('; '));
  assert.is(lookups, 1, 'only the first pass looked anything up');
  gate.resolve();
  await reporting.stop();
  assert.equal(ctx.posts, ['/hold']);
});

test.run();
