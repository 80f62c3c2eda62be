// A cached MTA-STS policy is fetched again, same id, once it is a day old (RFC 8461 3.3), in the
// background: the lookup that finds it due answers at once with the cached policy, however long
// the policy host takes. A refresh that succeeds renews the policy's max_age in the store too,
// so another process still applies it past the first fetch's expiry while the policy host is
// down; one that fails leaves the cached policy in force and is reported as a fetch failure.
//
// Through real interfaces: the MTA-STS resolver with a real document store, the test DNS server,
// a real HTTPS policy host (test CA), a TCP server that accepts and never answers, and a port
// nothing listens on.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mtaStsPolicyStore } from '../apps/services/mta-sts-policies.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver, type MtaStsPolicy } from '../infra/mail/mta-sts.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';

interface Context {
  ca: TestCa; dns: TestDnsServer; policies: PolicyServer; dir: string; documents: SqliteDocumentStore; now: number;
  /** Accepts connections and never answers; the sockets it holds. */
  silent: net.Server; held: net.Socket[];
  /** A port nothing listens on. */
  closedPort: number;
}

const DAY_MS = 86_400_000;
const WEEK_S = 7 * 86_400;
const test = suite<Context>('MTA-STS: refreshing a cached policy');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.weekly.test']));
  ctx.policies.policies.set('weekly.test', policyText('enforce', ['mx.weekly.test'], WEEK_S));
  ctx.dns = await startDnsServer([
    { name: '_mta-sts.weekly.test', type: 'TXT', data: 'v=STSv1; id=w1' },
    { name: 'mta-sts.weekly.test', type: 'A', data: '127.0.0.1' },
  ]);
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-sts-refresh-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  ctx.held = [];
  ctx.silent = net.createServer((socket) => ctx.held.push(socket));
  await new Promise<void>((resolve) => ctx.silent.listen(0, '127.0.0.1', () => resolve()));
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
  ctx.closedPort = (closed.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
});

test.after(async (ctx) => {
  for (const socket of ctx.held) socket.destroy();
  await new Promise<void>((resolve) => ctx.silent.close(() => resolve()));
  await ctx.policies.close();
  await ctx.dns.close();
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
  ctx.ca.remove();
});

/** A sender process's resolver, asking the policy host on `port`. */
function resolver(ctx: Context, port: number, fetchTimeoutMs = 2000): MtaStsResolver {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  return new MtaStsResolver({
    dns, port, ca: ctx.ca.ca, allowAddresses: new Set(['127.0.0.1']), fetchTimeoutMs, store: mtaStsPolicyStore(ctx.documents), now: () => ctx.now,
    onStoreError: (error) => { throw error; },
  });
}

const stored = async (ctx: Context) => (await ctx.documents.collection<MtaStsPolicy & { _id: string }>(COLLECTIONS.mtaStsPolicies).get('weekly.test'))!;

test('a day-old policy is fetched again behind the lookup; the renewal reaches the store and outlasts the first expiry in another process', async (ctx) => {
  const start = (ctx.now = Date.now());
  const first = resolver(ctx, ctx.policies.port);
  assert.is((await first.policyFor('weekly.test')).policy?.mode, 'enforce');
  assert.is((await stored(ctx)).expiresAt, start + WEEK_S * 1000);

  ctx.now = start + DAY_MS - 60_000;
  await first.policyFor('weekly.test');
  assert.is(ctx.policies.fetches.get('weekly.test'), 1, 'not a day old yet: not fetched again');

  ctx.now = start + DAY_MS;
  const due = await first.policyFor('weekly.test');
  assert.equal([due.policy?.id, due.failure], ['w1', undefined]);
  await waitUntil(async () => (await stored(ctx)).expiresAt === start + DAY_MS + WEEK_S * 1000, 'the refreshed policy is stored with its renewed expiry');
  assert.is(ctx.policies.fetches.get('weekly.test'), 2);

  // Another process, past the first fetch's expiry, whose policy host never answers.
  ctx.now = start + WEEK_S * 1000 + 3_600_000;
  const other = resolver(ctx, (ctx.silent.address() as net.AddressInfo).port, 30_000);
  const late = await other.policyFor('weekly.test');
  assert.equal([late.policy?.id, late.policy?.mode, late.failure], ['w1', 'enforce', undefined]);
  // The policy was due again (six days old): its refresh is under way, and the lookup did not wait for it.
  await waitUntil(() => ctx.held.length === 1, 'the refresh connected to the policy host');
  assert.ok(!ctx.held[0].destroyed, 'the refresh is still waiting for the policy host');
});

test('a refresh that fails leaves the cached policy in force and is reported; the store keeps what it had', async (ctx) => {
  // The policy as the test above left it stored, two days after it was fetched; the policy host down.
  const before = await stored(ctx);
  ctx.now = before.expiresAt - WEEK_S * 1000 + 2 * DAY_MS;
  const down = resolver(ctx, ctx.closedPort);
  assert.equal((await down.policyFor('weekly.test')).failure, undefined, 'the lookup that starts the refresh does not wait for it');
  await waitUntil(async () => (await down.policyFor('weekly.test')).failure !== undefined, 'the failed refresh is reported');
  const after = await down.policyFor('weekly.test');
  assert.equal([after.policy?.id, after.policy?.mode, after.policy?.mx], ['w1', 'enforce', ['mx.weekly.test']]);
  assert.is(after.failure?.resultType, 'sts-policy-fetch-error');
  assert.match(after.failure?.detail ?? '', /ECONNREFUSED/);
  assert.equal(await stored(ctx), before);
});

test.run();
