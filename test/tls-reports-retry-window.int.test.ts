// TLS reports (RFC 8460) are retried after the UTC day turns: each hourly pass of
// startTlsReporting looks at the last three days, not only yesterday, so a report of day D that
// failed on the last pass of D+1, or whose claim an instance that stopped left `sending`, is
// sent by a pass on D+2; and a report is claimed at most 48 times in all (docs/delivery.md, TLS
// reports). Real document store, real DNS cache and test DNS server, real startTlsReporting
// and sendTlsReports; the HTTPS egress is a recording stand-in that answers 503 or 200.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, startTlsReporting, tlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes, TlsSessionCounter } from '../apps/services/tls-reports/session-counts.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import type { HttpEgress } from '../infra/ports/http-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';

interface Context {
  dir: string;
  documents: SqliteDocumentStore;
  dns: TestDnsServer;
  posts: string[];
  /** Whether the destination answers 503. */
  failing: boolean;
  now: number;
  deps: TlsReportingDeps;
}
const test = suite<Context>('TLS reports: retries across the UTC day boundary');

const D = '2031-05-01';
const at = (iso: string) => Date.parse(iso);
const PASS_MS = 20;

test.before.each(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'tlsrpt-window-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  ctx.dns = await startDnsServer(['late.test', 'stuck.test'].map((domain) => ({ name: `_smtp._tls.${domain}`, type: 'TXT' as const, data: `v=TLSRPTv1; rua=https://reports.${domain}/tlsrpt` })));
  ctx.posts = [];
  ctx.failing = false;
  const egress: HttpEgress = {
    post: async (post) => {
      ctx.posts.push(String(post.url));
      return ctx.failing ? { httpStatus: 503, errorCode: 'http_error', durationMs: 1, responseSnippet: null } : { httpStatus: 200, errorCode: null, durationMs: 1, responseSnippet: null };
    },
    checkDestination: async () => ({ ok: true }),
  };
  ctx.deps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 })),
    transport: { name: 'unused', send: async () => { throw new Error('no mailto here'); }, close: async () => {} } as unknown as MailTransport,
    secrets: null as never, from: null, egress, https: { dnsServers: [ctx.dns.address], allow: new Set() },
    now: () => new Date(ctx.now), onError: (error) => { throw error; }, onWarning: () => {},
  };
  await ensureTlsSessionCountIndexes(ctx.documents);
  await sessionOnD(ctx, 'late.test');
});

test.after.each(async (ctx) => {
  await ctx.dns.close();
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

/** A TLS session with `domain` on day D, counted as the MX transport's sink counts them. */
async function sessionOnD(ctx: Context, domain: string): Promise<void> {
  const counter = new TlsSessionCounter(ctx.documents);
  counter.record({ recipientDomain: domain, policy: { type: 'no-policy-found', domain, strings: [], mxHosts: [] }, result: 'success', mxHost: `mx.${domain}`, at: new Date(`${D}T12:00:00Z`) });
  await counter.close();
}

const report = (ctx: Context, domain = 'late.test') => tlsReports(ctx.documents).get(`${D}|${domain}`);

/** Runs hourly passes (every PASS_MS here) until the report of D has `status`. */
async function passesUntil(ctx: Context, status: string, what: string): Promise<void> {
  const reporting = startTlsReporting(ctx.deps, PASS_MS);
  try {
    await waitUntil(async () => (await report(ctx))?.status === status, what, 3000);
  } finally {
    await reporting.stop();
  }
}

test('a report of D that failed on the last pass of D+1 is sent by the first pass of D+2', async (ctx) => {
  ctx.failing = true;
  ctx.now = at('2031-05-02T23:10:00Z');
  await passesUntil(ctx, 'failed', 'the report of D failed on D+1');
  const postsBefore = ctx.posts.length;
  assert.ok(postsBefore >= 1);

  ctx.failing = false;
  ctx.now = at('2031-05-03T00:10:00Z');
  await passesUntil(ctx, 'sent', 'the failed report of D is tried again and sent on D+2');
  assert.ok(ctx.posts.length > postsBefore);
});

test('a claim of D left `sending` on D+1 by an instance that stopped is taken over on D+2 once stale', async (ctx) => {
  // The instance that claimed it at 23:30 on D+1 stopped before posting.
  await tlsReports(ctx.documents).insert({ _id: `${D}|late.test`, day: D, domain: 'late.test', reportId: 'r', status: 'sending', attempts: 1, results: [], updatedAt: '2031-05-02T23:30:00.000Z' });
  ctx.now = at('2031-05-03T01:40:00Z'); // more than 2 hours later
  await passesUntil(ctx, 'sent', 'the abandoned report of D is taken over and sent on D+2');
  assert.equal(ctx.posts, ['https://reports.late.test/tlsrpt']);
  assert.is((await report(ctx))!.attempts, 2);
});

test('a report claimed 48 times is not claimed again, whether it failed or was left `sending`', async (ctx) => {
  await sessionOnD(ctx, 'stuck.test');
  await tlsReports(ctx.documents).insert({ _id: `${D}|late.test`, day: D, domain: 'late.test', reportId: 'r', status: 'failed', attempts: 48, results: [], updatedAt: '2031-05-02T23:10:00.000Z' });
  await tlsReports(ctx.documents).insert({ _id: `${D}|stuck.test`, day: D, domain: 'stuck.test', reportId: 's', status: 'sending', attempts: 48, results: [], updatedAt: '2031-05-02T20:00:00.000Z' });
  ctx.now = at('2031-05-03T00:10:00Z');
  assert.equal(await sendTlsReports(ctx.deps, D), []);
  assert.equal(ctx.posts, []);
  assert.is((await report(ctx))!.status, 'failed');
  assert.is((await report(ctx, 'stuck.test'))!.status, 'sending');
});

test.run();
