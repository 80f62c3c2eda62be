// The memory the sender's site registry (apps/services/delivery/sites.ts) holds per recipient
// domain stays small whatever MX set the domain's DNS answers. It remembers up to 100,000
// domains (MAX_DOMAINS), each with its site's key, and up to 10,000 sites; the MX set is the
// recipient's to choose: a wildcard MX of 200 long host names (~50 KB, one answer over TCP) makes
// every address at a new subdomain another domain. Domains sharing a set share their site's one
// key, and a key names at most the ten hosts the transport would consider (siteKeyOf,
// domain/delivery/sites.ts), whether the set is shared or each domain answers its own. Shown
// with a real DNS server and the real DNS cache: the heap the registry holds, by what is freed
// once it is dropped (less what one site holds, for domains sharing it), times its bounds.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SiteRegistry } from '../apps/services/delivery/sites.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { settledHeapUsed } from './support/heap.ts';


const DOMAINS = 100;
const MX_HOSTS = 200;
const MAX_DOMAINS = 100_000;
const MAX_SITES = 10_000;
const MiB = 1024 * 1024;

interface Context { dns: TestDnsServer }
const test = suite<Context>('memory a site registry holds per recipient domain');

// Host names of about 240 characters: three labels of 59, the host's number and its zone.
const label = 'x'.repeat(59);
const hostsUnder = (zone: string) => Array.from({ length: MX_HOSTS }, (_, i) => `h${String(i).padStart(3, '0')}.${label}.${label}.${label}.${zone}`);
const shared = Array.from({ length: DOMAINS }, (_, i) => `signup${i}.evil.test`);
const own = Array.from({ length: DOMAINS }, (_, i) => `own${i}.evil.test`);

test.before(async (ctx) => {
  const mx = (domain: string, hosts: string[]) => hosts.map((h): ZoneRecord => ({ name: domain, type: 'MX', data: { preference: 10, exchange: h } }));
  // What a wildcard MX would answer, written out for each name the test asks; and a set of its own per domain.
  const wildcard = hostsUnder('evil.test');
  ctx.dns = await startDnsServer([...shared.flatMap((d) => mx(d, wildcard)), ...own.flatMap((d) => mx(d, hostsUnder(d)))]);
});

test.after(async (ctx) => {
  await ctx.dns.close();
});


/**
 * The heap a registry holds once `domains` are resolved (what is freed once it is dropped: the
 * test's DNS server and client hold what they hold either way); and how many sites they make.
 */
async function heldBy(ctx: Context, domains: string[]): Promise<{ bytes: number; sites: number }> {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 2000, tries: 1 }));
  let registry: SiteRegistry | null = new SiteRegistry({ dns, rules: [] });
  const keys = new Set<string>();
  for (const d of domains) keys.add(await registry.resolve(d));
  // The positive marker: every domain is known (no lookup is needed to schedule it).
  for (const d of domains) assert.ok(registry.knownKeyOf(d), `${d} is remembered`);
  assert.is(dns.stats.entries, 0, 'the DNS cache keeps none of the answers (TTL 0): what is held is the registry\'s');
  const sites = keys.size;
  // Not held here: the keys are the registry's to account for.
  keys.clear();
  const withDomains = await settledHeapUsed();
  registry = null;
  return { bytes: withDomains - await settledHeapUsed(), sites };
}

test('domains sharing one large MX set hold little each: 100,000 of them within a few MiB', async (ctx) => {
  const all = await heldBy(ctx, shared);
  assert.is(all.sites, 1, 'one site');
  // What the one site holds, whatever its domains: the registry of one of them holds it too.
  const one = await heldBy(ctx, shared.slice(0, 1));
  const perDomain = (all.bytes - one.bytes) / (shared.length - 1);
  const atBound = perDomain * MAX_DOMAINS;
  assert.ok(atBound < 32 * MiB, `the registry holds ${Math.round(perDomain)} bytes per recipient domain: at its bound of ${MAX_DOMAINS} domains, ${Math.round(atBound / MiB)} MiB`);
});

test('domains each with a large MX set of their own hold a bounded key each: 10,000 sites within tens of MiB', async (ctx) => {
  const { bytes, sites } = await heldBy(ctx, own);
  const perDomain = bytes / own.length;
  assert.is(sites, DOMAINS, 'a site per domain');
  const atBound = perDomain * MAX_SITES;
  assert.ok(atBound < 64 * MiB, `the registry holds ${Math.round(perDomain / 1024)} KiB per site (the MX set is ~${Math.round(hostsUnder(own[0]).join(',').length / 1024)} KiB): at its bound of ${MAX_SITES} sites, ${Math.round(atBound / MiB)} MiB`);
});

test.run();
