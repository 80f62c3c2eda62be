// The mail DNS cache (infra/dns/dns-cache.ts) over its stub resolver, against the test DNS
// server, counting the queries that reach it: answers are kept for their TTL, negative answers
// for the SOA's negative TTL, failures not at all, and concurrent questions share one query.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { DnsQueryError, StubResolver } from '../infra/dns/stub-resolver.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';

interface Context {
  dns: TestDnsServer;
  /** The cache's clock, moved by the tests. */
  now: number;
}

const ZONE: ZoneRecord[] = [
  { name: 'cached.test', type: 'MX', data: { preference: 10, exchange: 'mx.cached.test' }, ttl: 300 },
  { name: 'mx.cached.test', type: 'A', data: '192.0.2.25', ttl: 60 },
  { name: 'short.test', type: 'A', data: '192.0.2.26', ttl: 0 },
  { name: 'failing.test', type: 'SERVFAIL' },
  { name: 'big.test', type: 'TXT', data: 'x'.repeat(1400), ttl: 300 },
];

const test = suite<Context>('mail DNS cache');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer(ZONE);
});

test.before.each((ctx) => {
  ctx.now = 1_000_000;
  ctx.dns.setZone(ZONE);
  ctx.dns.negativeTtl = null;
  ctx.dns.queries.length = 0;
});

test.after(async (ctx) => {
  await ctx.dns.close();
});

const cacheOf = (ctx: Context, options: { maxEntries?: number } = {}) =>
  new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }), { now: () => ctx.now, ...options });
const served = (ctx: Context, name: string, type: string) => ctx.dns.queries.filter((q) => q.name === name && q.type === type).length;

test('an answer is kept for its TTL: asked again only once the smallest TTL has passed', async (ctx) => {
  const cache = cacheOf(ctx);
  assert.equal(await cache.mx('cached.test'), { kind: 'answer', authenticated: false, records: [{ exchange: 'mx.cached.test', priority: 10 }] });
  await cache.mx('cached.test');
  assert.equal((await cache.addresses('mx.cached.test', 4)).kind, 'answer');
  await cache.addresses('mx.cached.test', 4);
  assert.is(served(ctx, 'cached.test', 'MX'), 1);
  assert.is(served(ctx, 'mx.cached.test', 'A'), 1);
  ctx.now += 61_000; // past the A record's 60 s, within the MX's 300 s
  await cache.mx('cached.test');
  await cache.addresses('mx.cached.test', 4);
  assert.is(served(ctx, 'cached.test', 'MX'), 1);
  assert.is(served(ctx, 'mx.cached.test', 'A'), 2);
  assert.equal(cache.stats, { hits: 3, queries: 3, entries: 2 });
});

test('TTL 0 is not kept', async (ctx) => {
  const cache = cacheOf(ctx);
  await cache.addresses('short.test', 4);
  await cache.addresses('short.test', 4);
  assert.is(served(ctx, 'short.test', 'A'), 2);
});

test('negative answers are kept for the SOA negative TTL (RFC 2308), and not at all without an SOA', async (ctx) => {
  const cache = cacheOf(ctx);
  // No SOA in the negative answers: nothing to go by, so asked every time.
  assert.is((await cache.addresses('mx.cached.test', 6)).kind, 'nodata');
  assert.is((await cache.mx('missing.test')).kind, 'nxdomain');
  await cache.addresses('mx.cached.test', 6);
  await cache.mx('missing.test');
  assert.is(served(ctx, 'mx.cached.test', 'AAAA'), 2);
  assert.is(served(ctx, 'missing.test', 'MX'), 2);

  ctx.dns.negativeTtl = 30;
  const withSoa = cacheOf(ctx);
  assert.is((await withSoa.addresses('mx.cached.test', 6)).kind, 'nodata');
  assert.is((await withSoa.mx('missing.test')).kind, 'nxdomain');
  ctx.now += 29_000;
  await withSoa.addresses('mx.cached.test', 6);
  await withSoa.mx('missing.test');
  assert.is(served(ctx, 'mx.cached.test', 'AAAA'), 3);
  assert.is(served(ctx, 'missing.test', 'MX'), 3);
  ctx.now += 2000;
  await withSoa.mx('missing.test');
  assert.is(served(ctx, 'missing.test', 'MX'), 4);
});

test('a failure is not kept: the next question asks again', async (ctx) => {
  const cache = cacheOf(ctx);
  for (let i = 0; i < 2; i++) {
    try {
      await cache.mx('failing.test');
      assert.unreachable('SERVFAIL should throw');
    } catch (error) {
      assert.instance(error, DnsQueryError);
      assert.is((error as DnsQueryError).code, 'ESERVFAIL');
    }
  }
  assert.is(served(ctx, 'failing.test', 'MX'), 2);
});

test('concurrent questions for one name and type share one query', async (ctx) => {
  const cache = cacheOf(ctx);
  const answers = await Promise.all(Array.from({ length: 20 }, () => cache.mx('cached.test')));
  assert.ok(answers.every((a) => a.kind === 'answer'));
  assert.is(served(ctx, 'cached.test', 'MX'), 1);
});

test('an answer too large for UDP is fetched again over TCP, and joined', async (ctx) => {
  const cache = cacheOf(ctx);
  const txt = await cache.txt('big.test');
  assert.equal(txt.kind === 'answer' && txt.records, ['x'.repeat(1400)]);
  assert.equal(ctx.dns.queries.filter((q) => q.name === 'big.test').map((q) => [q.transport, q.truncated]), [['udp', true], ['tcp', false]]);
});

test('bounded: the oldest entries go when the cache is full', async (ctx) => {
  const cache = cacheOf(ctx, { maxEntries: 2 });
  ctx.dns.setZone([...ZONE, ...[1, 2, 3].map((n): ZoneRecord => ({ name: `h${n}.test`, type: 'A', data: `192.0.2.${n}`, ttl: 300 }))]);
  for (const n of [1, 2, 3]) await cache.addresses(`h${n}.test`, 4);
  assert.is(cache.stats.entries, 2);
  await cache.addresses('h3.test', 4);
  await cache.addresses('h1.test', 4);
  assert.equal([1, 2, 3].map((n) => served(ctx, `h${n}.test`, 'A')), [2, 1, 1]);
});

test('a resolver that does not answer: ETIMEOUT after the attempt timeout', async (ctx) => {
  // A UDP port nobody answers on: the test server's own port, with a closed server behind it.
  const silent = await startDnsServer([]);
  const address = silent.address;
  await silent.close();
  const cache = new DnsCache(new StubResolver({ servers: [address], timeoutMs: 200, tries: 1 }));
  try {
    await cache.mx('cached.test');
    assert.unreachable('should have failed');
  } catch (error) {
    assert.instance(error, DnsQueryError);
    assert.is((error as DnsQueryError).code, 'ETIMEOUT');
  }
});

test.run();
