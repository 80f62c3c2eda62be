// What the MTA-STS resolver (infra/mail/mta-sts.ts) holds in memory for the policies it caches.
// A recipient domain's owner writes its policy (up to 64 KiB), and whoever gives an address
// (a sign-up form) chooses the domain: a policy costs about its size however it is written
// (many short lines, each once a string of its own, cost several times that), and the cache is
// bounded in bytes, the least recently used policy going first (read again from the document
// store, when there is one, rather than fetched). Real DNS server, real HTTPS policy host; the
// heap a resolver holds is what is freed once it is dropped, and an eviction shows as a fetch.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mtaStsPolicyStore } from '../apps/services/mta-sts-policies.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver, type MtaStsOptions } from '../infra/mail/mta-sts.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { settledHeapUsed } from './support/heap.ts';


const DOMAINS = 30;
const KiB = 1024;
const domains = Array.from({ length: DOMAINS }, (_, i) => `big${i}.test`);

interface Context { ca: TestCa; dns: TestDnsServer; policies: PolicyServer }
const test = suite<Context>('MTA-STS: memory held by cached policies');

/** A valid policy just under 64 KiB: 100 mx patterns, then short lines (ignored by the parser, kept for TLS reports). */
function bigPolicy(domain: string): string {
  const lines = ['version: STSv1', 'mode: testing', ...Array.from({ length: 100 }, (_, i) => `mx: mx${i}.${domain}`), 'max_age: 86400'];
  let size = lines.join('\r\n').length;
  while (size < 64 * KiB - 100) {
    lines.push('p: 1');
    size += 6;
  }
  return lines.join('\r\n') + '\r\n';
}

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const cert = ctx.ca.issue(domains.map((d) => `mta-sts.${d}`));
  const zone: ZoneRecord[] = domains.flatMap((d): ZoneRecord[] => [
    { name: `_mta-sts.${d}`, type: 'TXT', data: 'v=STSv1; id=1' },
    { name: `mta-sts.${d}`, type: 'A', data: '127.0.0.1' },
  ]);
  ctx.dns = await startDnsServer(zone);
  ctx.policies = await startPolicyServer(cert);
  for (const d of domains) ctx.policies.policies.set(d, bigPolicy(d));
});

test.before.each((ctx) => {
  ctx.policies.fetches.clear();
});

test.after(async (ctx) => {
  await ctx.policies.close();
  await ctx.dns.close();
  ctx.ca.remove();
});


function resolverFor(ctx: Context, options: Partial<MtaStsOptions> = {}): MtaStsResolver {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  return new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses: new Set(['127.0.0.1']), fetchTimeoutMs: 5000, ...options });
}

/** Asks for `domain`'s policy and keeps nothing of the answer (only the resolver may hold it). */
async function ask(resolver: MtaStsResolver, domain: string): Promise<void> {
  const { policy, failure } = await resolver.policyFor(domain);
  assert.ok(policy, `${domain}: ${failure?.detail}`);
  assert.is(policy.mx.length, 100);
  assert.ok(policy.lines.length > 10_000, `${domain}: ${policy.lines.length} lines`);
}

const fetches = (ctx: Context, domain: string): number => ctx.policies.fetches.get(domain) ?? 0;

/** The heap the resolver `fill` puts in the box holds: what is freed once nothing refers to it. */
async function heldBy(fill: (box: { resolver?: MtaStsResolver }) => Promise<void>): Promise<number> {
  const box: { resolver?: MtaStsResolver } = {};
  await fill(box);
  // A fetch's socket refers to the resolver (its handlers) until it has closed.
  await waitUntil(() => !process.getActiveResourcesInfo().includes('TCPSocketWrap'), 'every connection to the policy host closed');
  const held = await settledHeapUsed();
  const dropped = new WeakRef(box.resolver!);
  delete box.resolver;
  const freed = held - (await settledHeapUsed());
  assert.is(dropped.deref(), undefined, 'the resolver was collected (measurement check)');
  return freed;
}

test('a cached 64 KiB policy of many short lines holds about 64 KiB', async (ctx) => {
  const held = await heldBy(async (box) => {
    const resolver = (box.resolver = resolverFor(ctx));
    for (const d of domains) await ask(resolver, d);
    // The positive marker: the policies are in memory (asked again: no fetch).
    await ask(resolver, domains[0]);
    assert.is(fetches(ctx, domains[0]), 1, 'a cached policy is not fetched again');
  });
  const perPolicy = held / DOMAINS;
  assert.ok(perPolicy > 48 * KiB, `the resolver held ${Math.round(perPolicy / KiB)} KiB per policy (measurement check: the policies are held)`);
  assert.ok(perPolicy < 96 * KiB, `each cached 64 KiB policy holds ${Math.round(perPolicy / KiB)} KiB of heap`);
});

test('the cache is bounded in bytes: the least recently used policy goes first, and the rest stays within the bound', async (ctx) => {
  const budget = 512 * KiB; // room for 8 of these policies
  const held = await heldBy(async (box) => {
    const resolver = (box.resolver = resolverFor(ctx, { maxCacheBytes: budget }));
    await ask(resolver, domains[0]);
    // domains[0] is asked for after each other domain: it stays the most recently used.
    for (const d of domains.slice(1)) {
      await ask(resolver, d);
      await ask(resolver, domains[0]);
    }
    assert.is(fetches(ctx, domains[0]), 1, 'the most recently used policy was kept');
    await ask(resolver, domains.at(-1)!);
    assert.is(fetches(ctx, domains.at(-1)!), 1, 'the latest policy was kept');
    await ask(resolver, domains[1]);
    assert.is(fetches(ctx, domains[1]), 2, 'the least recently used policy was evicted: fetched again');
  });
  assert.ok(held > 6 * 64 * KiB, `the resolver held ${Math.round(held / KiB)} KiB (measurement check: the policies are held)`);
  assert.ok(held < budget + 64 * KiB, `the resolver held ${Math.round(held / KiB)} KiB with a bound of ${budget / KiB} KiB`);
});

test('a policy evicted from memory is read again from the document store, not fetched', async (ctx) => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-sts-memory-'));
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  try {
    const documentStore = mtaStsPolicyStore(documents);
    const loads: string[] = [];
    const store = { ...documentStore, load: (domain: string) => (loads.push(domain), documentStore.load(domain)) };
    const resolver = resolverFor(ctx, { maxCacheBytes: 256 * KiB, store, onStoreError: (error) => { throw error; } });
    for (const d of domains.slice(0, 8)) await ask(resolver, d);
    assert.equal(domains.slice(0, 8).map((d) => fetches(ctx, d)), Array(8).fill(1));
    // domains[0] was evicted (8 policies do not fit): the store still has it, whole.
    loads.length = 0;
    await ask(resolver, domains[0]);
    assert.equal(loads, [domains[0]], 'not in memory: asked of the store');
    assert.is(fetches(ctx, domains[0]), 1, 'read from the store, not fetched');
    assert.equal((await resolver.policyFor(domains[0])).policy?.lines.join('\r\n') + '\r\n', bigPolicy(domains[0]));
  } finally {
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
