// The MTA-STS resolver (infra/mail/mta-sts.ts) remembers each failed policy fetch for five
// minutes, up to 10,000 domains (maxPolicies), and a failure's detail is worded from what the
// recipient domain's owner serves: a policy host with 1,500 private addresses (one DNS answer
// over TCP), a Content-Type of 16 KiB. Whoever gives Relay a recipient address chooses the domain,
// and with wildcard records every new subdomain is one more failure for the price of one email.
// So a failure names a few addresses and how many more, and its detail is cut: the failures
// remembered at their bound stay within what the cached policies are held to (8 MiB), not the
// ~200 MiB of failures that listed every address.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { settledHeapUsed } from './support/heap.ts';


const KiB = 1024;
const MiB = 1024 * KiB;
const DOMAINS = 30;
/** A records of each policy host: about as many as one DNS answer over TCP holds. */
const ADDRESSES = 1_500;
/** Failed fetches the resolver remembers at most (MtaStsOptions.maxPolicies, its default). */
const MAX_REMEMBERED = 10_000;
/** The bound of the cached policies themselves (maxCacheBytes), and some room: what the failures may hold too. */
const BUDGET = 16 * MiB;

const domains = Array.from({ length: DOMAINS }, (_, i) => `signup${i}.evil.test`);
const privateAddresses = Array.from({ length: ADDRESSES }, (_, i) => `10.0.${Math.floor(i / 256)}.${i % 256}`);

interface Context { dns: TestDnsServer }
const test = suite<Context>('MTA-STS: memory held by remembered fetch failures');

test.before(async (ctx) => {
  const zone: ZoneRecord[] = domains.flatMap((d): ZoneRecord[] => [
    { name: `_mta-sts.${d}`, type: 'TXT', data: 'v=STSv1; id=1' },
    ...privateAddresses.map((address): ZoneRecord => ({ name: `mta-sts.${d}`, type: 'A', data: address })),
  ]);
  ctx.dns = await startDnsServer(zone);
});

test.after(async (ctx) => {
  await ctx.dns.close();
});


/** Asks for `domain`'s policy and keeps nothing of the answer (only the resolver may hold it). */
async function ask(resolver: MtaStsResolver, domain: string): Promise<void> {
  const { policy, failure } = await resolver.policyFor(domain);
  assert.is(policy, null);
  // The positive marker: the fetch failed for the policy host's addresses, and says so.
  assert.ok(failure, `${domain}: a failure`);
  assert.match(failure.detail, /resolves only to addresses Relay does not connect to/);
}

test(`${DOMAINS} recipient domains whose policy host has ${ADDRESSES} private addresses: the failures remembered, at their bound of ${MAX_REMEMBERED}, hold less than ${BUDGET / MiB} MiB`, async (ctx) => {
  const box: { resolver?: MtaStsResolver } = {};
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 2000, tries: 1 }));
  box.resolver = new MtaStsResolver({ dns, fetchTimeoutMs: 5000 });
  for (const d of domains) await ask(box.resolver, d);
  assert.is(dns.stats.entries, 0, 'the DNS cache keeps none of the answers (TTL 0): what is held is the resolver\'s');
  // Remembered: asked again, the same failure comes without a DNS query for the policy host.
  const queriesBefore = ctx.dns.queries.length;
  await ask(box.resolver, domains[0]);
  assert.ok(!ctx.dns.queries.slice(queriesBefore).some((q) => q.name === `mta-sts.${domains[0]}`), 'the failure is remembered, not fetched again');

  const held = await settledHeapUsed();
  const dropped = new WeakRef(box.resolver);
  delete box.resolver;
  const freed = held - (await settledHeapUsed());
  assert.is(dropped.deref(), undefined, 'the resolver was collected (measurement check)');
  const perFailure = freed / DOMAINS;
  const atBound = perFailure * MAX_REMEMBERED;
  assert.ok(atBound < BUDGET,
    `each remembered failure holds ${Math.round(perFailure / KiB)} KiB of heap: at the ${MAX_REMEMBERED} the resolver remembers, ${Math.round(atBound / MiB)} MiB`);
});

test.run();
