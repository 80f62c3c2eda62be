// The periodic re-check of verified sending domains (domain/domain-recheck.ts, run by
// apps/services/domain-recheck.ts): domains verified through the real API against a DNS server
// the test starts, their records then removed (or their lookups answered SERVFAIL), and the
// pass run at times moved forward on the API's clock. A domain whose records are wrong stays
// verified for the grace period (72 h) and is failed after it, after which admission refuses
// its sender with 422 domain_not_verified; lookups that fail change nothing, a passing check
// ends a run of failures, an operator's vouching stands, and passes at once check a domain
// once. Last, a real `relay retention` process runs the pass by itself, logs and counts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { recheckDomains, type RecheckPassOptions } from '../apps/services/domain-recheck.ts';
import { domainsOf, markDomainVerified, type DomainView, type RecheckResult } from '../apps/services/management/domains.ts';
import { loadConfig } from '../infra/config.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';
import { sumOf, scrape } from './support/metrics.ts';
import { freePort, spawnRelay } from './support/relay-process.ts';

const HOUR = 3_600_000;
const MAIL_HOST = 'mx.relay.test';

interface Ctx {
  dns: TestDnsServer;
  /** What the DNS server serves, by sending domain. */
  zones: Map<string, ZoneRecord[]>;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
  projectId: string;
  /** An API key of the project, for sends. */
  secret: string;
}

/** The records a customer who followed the instructions publishes, less those of `skip`'s purposes. */
function published(domain: DomainView, skip: string[] = []): ZoneRecord[] {
  return domain.records.filter((r) => !skip.includes(r.purpose)).map((r): ZoneRecord =>
    r.type === 'MX'
      ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
      : { name: r.name, type: 'TXT', data: r.txtStrings ?? r.value });
}

/** Every name the domain's records live at answered SERVFAIL, as a broken authoritative server would. */
const servfail = (domain: DomainView): ZoneRecord[] => [...new Set(domain.records.map((r) => r.name))].map((name) => ({ name, type: 'SERVFAIL' }));

function serve(ctx: Ctx, domain: DomainView, records: ZoneRecord[]): void {
  ctx.zones.set(domain.name, records);
  ctx.dns.setZone([...ctx.zones.values()].flat());
}

/** Created, published and verified through the API, and connected to the project. */
async function verifiedDomain(ctx: Ctx, name: string): Promise<DomainView> {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name } });
  assert.is(created.statusCode, 201, created.body);
  const domain = created.json() as DomainView;
  serve(ctx, domain, published(domain));
  const verified = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(verified.json().status, 'verified', verified.body);
  assert.is((await call(ctx.t, 'POST', `/v1/domains/${domain.id}/projects/${ctx.projectId}`, { as: ctx.owner })).statusCode, 200);
  return verified.json() as DomainView;
}

const read = async (ctx: Ctx, domain: DomainView): Promise<DomainView> => (await call(ctx.t, 'GET', `/v1/domains/${domain.id}`, { as: ctx.owner })).json() as DomainView;
const checkOf = (domain: DomainView, purpose: string) => domain.checks!.find((c) => c.purpose === purpose)!;

/** POST /v1/emails from the domain: 'accepted', or the error code. */
async function send(ctx: Ctx, domain: DomainView): Promise<string> {
  const response = await ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.secret}` },
    payload: { from: `hello@${domain.name}`, to: `you@${domain.name}`, subject: 'still sending?', text: 'hi' },
  });
  if (response.statusCode === 202) return 'accepted';
  assert.is(response.statusCode, 422, response.body);
  return errorCode(response);
}

function passOptions(ctx: Ctx, overrides: Partial<RecheckPassOptions> = {}): RecheckPassOptions {
  return { documents: ctx.t.ctx.documents, config: ctx.t.config, dns: ctx.t.ctx.services.dns, policy: ctx.t.config.domainRecheck, now: () => ctx.t.clock.now(), ...overrides };
}

/** One pass at the clock's time now; what it re-checked, by domain name. */
async function pass(ctx: Ctx): Promise<Map<string, RecheckResult>> {
  const results = new Map<string, RecheckResult>();
  await recheckDomains(passOptions(ctx, { onRechecked: (result) => results.set(result.domain.name, result) }));
  return results;
}

/** Queries the DNS server answered for the domain's names since `from`. */
const queriesFor = (ctx: Ctx, domain: DomainView, from = 0) => ctx.dns.queries.slice(from).filter((q) => q.name === domain.name || q.name.endsWith(`.${domain.name}`));

const test = suite<Ctx>('re-check of verified sending domains');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
});

test.after(async (ctx) => {
  await ctx.dns.close();
});

test.before.each(async (ctx) => {
  ctx.zones = new Map();
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: MAIL_HOST });
  ctx.t.clock.freeze();
  ctx.owner = await newCaller(ctx.t, 'owner@acme.test');
  ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId } = await workspaceWithProject(ctx.t, ctx.owner));
  const key = await call(ctx.t, 'POST', `/v1/projects/${ctx.projectId}/api-keys`, { as: ctx.owner, body: { name: 'sender', permissions: ['email:send'] } });
  ctx.secret = key.json().secret;
});

test.after.each(async (ctx) => {
  await ctx.t.close();
});

test('given a verified domain whose DKIM record is removed, then it stays verified through the 72 h grace, is failed after it, and its sends are refused 422 domain_not_verified', async (ctx) => {
  assert.equal(ctx.t.config.domainRecheck, { intervalMs: 6 * HOUR, graceMs: 72 * HOUR }, 'the defaults');
  const domain = await verifiedDomain(ctx, 'lapsed.test');
  const verifiedAt = ctx.t.clock.now().getTime();
  serve(ctx, domain, published(domain, ['dkim']));

  // Not due within the interval: DNS is not asked.
  ctx.t.clock.advance(6 * HOUR - 1);
  const before = ctx.dns.queries.length;
  assert.equal([...(await pass(ctx)).keys()], []);
  assert.equal(queriesFor(ctx, domain, before), []);
  assert.is((await read(ctx, domain)).lastCheckedAt, new Date(verifiedAt).toISOString());

  ctx.t.clock.advance(1);
  const first = (await pass(ctx)).get(domain.name);
  assert.is(first?.verdict, 'wrong');
  assert.is(first?.outcome.change, 'started_failing');
  assert.ok(queriesFor(ctx, domain, before).length > 0, 'the DNS server was asked');
  const failingSince = ctx.t.clock.now().getTime();
  let seen = await read(ctx, domain);
  assert.is(seen.status, 'verified');
  assert.is(seen.verifiedBy, 'dns');
  assert.is(seen.lastCheckedAt, ctx.t.clock.now().toISOString(), 'the check is stored as a manual one is');
  assert.is(checkOf(seen, 'dkim').status, 'missing');
  assert.is(checkOf(seen, 'mail_from_mx').status, 'ok');
  assert.is(await send(ctx, domain), 'accepted');

  // Every 6 h, wrong each time, then once more a millisecond before the grace ends.
  for (let after = 6 * HOUR; after <= 60 * HOUR; after += 6 * HOUR) {
    ctx.t.clock.set(new Date(failingSince + after));
    assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'still_failing');
  }
  ctx.t.clock.set(new Date(failingSince + 72 * HOUR - 1));
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'still_failing', 'a millisecond before the grace ends');
  seen = await read(ctx, domain);
  assert.is(seen.status, 'verified');
  assert.is(await send(ctx, domain), 'accepted');

  // Past the grace: failed, and sends from it refused.
  ctx.t.clock.advance(6 * HOUR);
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'failed');
  seen = await read(ctx, domain);
  assert.is(seen.status, 'failed');
  assert.is(seen.verifiedBy, null);
  assert.is(seen.verifiedAt, null);
  assert.is(checkOf(seen, 'dkim').status, 'missing');
  assert.is(await send(ctx, domain), 'domain_not_verified');

  // A failed domain is no longer re-checked: its owner verifies it again once fixed.
  ctx.t.clock.advance(6 * HOUR);
  const later = ctx.dns.queries.length;
  await pass(ctx);
  assert.equal(queriesFor(ctx, domain, later), []);
  serve(ctx, domain, published(domain));
  assert.is((await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner })).json().status, 'verified');
  assert.is(await send(ctx, domain), 'accepted');
});

test('given lookups that fail (SERVFAIL), then the domain stays verified however long, and a run of wrong re-checks neither ends nor fails on them', async (ctx) => {
  const broken = await verifiedDomain(ctx, 'servfail.test');
  const gone = await verifiedDomain(ctx, 'flaky.test');
  serve(ctx, broken, servfail(broken));
  serve(ctx, gone, []);

  ctx.t.clock.advance(6 * HOUR);
  let results = await pass(ctx);
  assert.is(results.get(broken.name)?.verdict, 'inconclusive');
  assert.is(results.get(gone.name)?.outcome.change, 'started_failing');
  const failingSince = ctx.t.clock.now().getTime();

  // Then both answer SERVFAIL for four days: the grace passes, nothing is failed.
  serve(ctx, gone, servfail(gone));
  for (let hours = 6; hours <= 96; hours += 6) {
    ctx.t.clock.advance(6 * HOUR);
    results = await pass(ctx);
    assert.is(results.get(broken.name)?.verdict, 'inconclusive');
    assert.is(results.get(gone.name)?.verdict, 'inconclusive');
  }
  for (const domain of [broken, gone]) {
    const seen = await read(ctx, domain);
    assert.is(seen.status, 'verified', domain.name);
    assert.is(seen.lastCheckedAt, ctx.t.clock.now().toISOString(), `${domain.name}: the inconclusive check is stored`);
    assert.ok(seen.checks!.filter((c) => c.required).every((c) => c.status === 'error'), `${domain.name}: ${JSON.stringify(seen.checks)}`);
    assert.is(await send(ctx, domain), 'accepted');
  }

  // DNS answers again, the records still gone: wrong for longer than the grace, failed.
  serve(ctx, gone, []);
  ctx.t.clock.advance(6 * HOUR);
  assert.ok(ctx.t.clock.now().getTime() - failingSince > 72 * HOUR);
  assert.is((await pass(ctx)).get(gone.name)?.outcome.change, 'failed');
  assert.is((await read(ctx, gone)).status, 'failed');
  assert.is(await send(ctx, gone), 'domain_not_verified');
  assert.is((await read(ctx, broken)).status, 'verified');
});

test('given a re-check that passes between wrong ones, then the grace starts again from the next wrong one', async (ctx) => {
  const domain = await verifiedDomain(ctx, 'wobbly.test');
  serve(ctx, domain, published(domain, ['mail_from_mx']));
  ctx.t.clock.advance(6 * HOUR);
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'started_failing');
  const firstFailure = ctx.t.clock.now().getTime();

  serve(ctx, domain, published(domain));
  ctx.t.clock.advance(6 * HOUR);
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'recovered');

  serve(ctx, domain, published(domain, ['mail_from_spf']));
  ctx.t.clock.advance(6 * HOUR);
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'started_failing');
  const secondFailure = ctx.t.clock.now().getTime();

  ctx.t.clock.set(new Date(firstFailure + 72 * HOUR + 6 * HOUR));
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'still_failing', '72 h after the first failure, but not after the second');
  assert.is((await read(ctx, domain)).status, 'verified');
  ctx.t.clock.set(new Date(secondFailure + 72 * HOUR));
  assert.is((await pass(ctx)).get(domain.name)?.outcome.change, 'failed');
  assert.is(await send(ctx, domain), 'domain_not_verified');
});

test('given a domain an operator marked verified, then it is never re-checked and stays verified without any record', async (ctx) => {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: 'vouched.test' } });
  const domain = created.json() as DomainView;
  await markDomainVerified(ctx.t.ctx.documents, domain.id, 'local test setup', ctx.t.clock.now());
  assert.is((await call(ctx.t, 'POST', `/v1/domains/${domain.id}/projects/${ctx.projectId}`, { as: ctx.owner })).statusCode, 200);
  const before = ctx.dns.queries.length;
  for (let i = 0; i < 20; i++) {
    ctx.t.clock.advance(6 * HOUR);
    assert.equal([...(await pass(ctx)).keys()], []);
  }
  assert.equal(queriesFor(ctx, domain, before), []);
  const seen = await read(ctx, domain);
  assert.equal([seen.status, seen.verifiedBy, seen.lastCheckedAt], ['verified', 'operator', null]);
  assert.is(await send(ctx, domain), 'accepted');
});

test('given two processes\' passes at once over the same store, then each due domain is checked once, and a manual check in between is not written over', async (ctx) => {
  const domains = await Promise.all(['one.test', 'two.test', 'three.test'].map((name) => verifiedDomain(ctx, name)));
  for (const domain of domains) serve(ctx, domain, published(domain, ['dkim']));
  // A second process's view of the store: its own connections to the same data directory.
  const other = await openStores(ctx.t.config);
  try {
    ctx.t.clock.advance(6 * HOUR);
    const before = ctx.dns.queries.length;
    const seen: RecheckResult[] = [];
    const onRechecked = (result: RecheckResult) => seen.push(result);
    const reports = await Promise.all([
      recheckDomains(passOptions(ctx, { onRechecked, concurrency: 1 })),
      recheckDomains(passOptions(ctx, { onRechecked, concurrency: 1, documents: other.documents })),
    ]);
    assert.is(reports[0].rechecked + reports[1].rechecked, 3);
    assert.equal(seen.map((r) => r.domain.name).sort(), ['one.test', 'three.test', 'two.test']);
    for (const domain of domains) {
      // One check: one query per record name and type (DKIM TXT, MAIL FROM MX and TXT, DMARC TXT).
      assert.is(queriesFor(ctx, domain, before).length, 4, domain.name);
      assert.is((await read(ctx, domain)).lastCheckedAt, ctx.t.clock.now().toISOString());
    }
    assert.ok(seen.every((r) => r.outcome.change === 'started_failing'), 'counted once each');

    // A manual check while a re-check waits on DNS: the manual check's outcome stands, and the
    // re-check, which finds a check stored since its claim, stores nothing and counts nothing.
    const [one] = domains;
    serve(ctx, one, published(one));
    ctx.t.clock.advance(6 * HOUR);
    const lookups = ctx.t.ctx.services.dns;
    const slow: typeof lookups = {
      async lookupRecords(records) {
        const manual = await call(ctx.t, 'POST', `/v1/domains/${one.id}/verify`, { as: ctx.owner });
        assert.is(manual.json().status, 'verified');
        serve(ctx, one, published(one, ['dkim']));
        return lookups.lookupRecords(records);
      },
    };
    const raced: RecheckResult[] = [];
    await recheckDomains(passOptions(ctx, { dns: slow, onRechecked: (r) => raced.push(r) }));
    assert.equal(raced.map((r) => r.domain.name).filter((name) => name === one.name), []);
    const stored = (await domainsOf(ctx.t.ctx.documents).get(one.id))!;
    assert.is(stored.status, 'verified');
    assert.ok(stored.checks!.every((c) => c.status === 'ok'), 'the manual check\'s records, all found');
    assert.is(stored.recheckFailingSince ?? null, null, 'its passing check ended the run of failures');
  } finally {
    await other.close();
  }
});

test.run();

// ---------------------------------------------------------------------------------------
const part = suite('the retention part runs the re-check');

part('given a `relay retention` process, then its first pass fails the domain wrong for over 72 h, warns of one that starts failing, logs both and counts them on /metrics', async () => {
  const dns = await startDnsServer([]);
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-domain-recheck-'));
  const env = { RELAY_DNS_SERVERS: dns.address, RELAY_MAIL_HOST: MAIL_HOST };
  let relay: ReturnType<typeof spawnRelay> | null = null;
  try {
    const t = await startTestApp(env, { dataDir });
    const ctx = { dns, zones: new Map(), t } as Ctx;
    try {
      ctx.owner = await newCaller(t, 'owner@acme.test');
      ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId } = await workspaceWithProject(t, ctx.owner));
      const realNow = Date.now();
      // Verified 80 h ago; its DKIM record gone since, as a re-check 74 h ago found.
      t.clock.freeze(new Date(realNow - 80 * HOUR));
      const expiring = await verifiedDomain(ctx, 'expiring.test');
      serve(ctx, expiring, published(expiring, ['dkim']));
      t.clock.set(new Date(realNow - 74 * HOUR));
      assert.is((await pass(ctx)).get(expiring.name)?.outcome.change, 'started_failing');
      // Verified 7 h ago; its MAIL FROM MX gone since.
      t.clock.set(new Date(realNow - 7 * HOUR));
      const lapsing = await verifiedDomain(ctx, 'lapsing.test');
      serve(ctx, lapsing, published(lapsing, ['mail_from_mx']));
    } finally {
      await t.close();
    }

    const port = await freePort();
    relay = spawnRelay(['retention'], { ...env, RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_FORMAT: 'json' });
    const url = `http://127.0.0.1:${port}`;
    const warnings = () => relay!.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.level === 40 && typeof line.domain === 'string');
    await waitUntil(() => warnings().length >= 2, 'two warnings naming domains', 30_000).catch((error: Error) => {
      throw new Error(`${error.message}; the process wrote:\n${relay!.output()}`);
    });
    const byDomain = new Map(warnings().map((line) => [line.domain, line]));
    assert.match(String(byDomain.get('expiring.test')?.msg), /^sending domain failed: .*domain_not_verified/);
    assert.match(String((byDomain.get('expiring.test')?.records as string[])[0]), /^dkim TXT .*\._domainkey\.expiring\.test: missing$/);
    assert.match(String(byDomain.get('lapsing.test')?.msg), /^sending domain fails its DNS re-check/);
    assert.equal(byDomain.get('lapsing.test')?.records, ['mail_from_mx MX bounce.lapsing.test: missing']);
    assert.ok(byDomain.get('lapsing.test')?.failsAt, 'says when it will fail');

    await waitUntil(async () => sumOf(await scrape(url), 'relay_domain_recheck_runs_total', { result: 'ok' }) >= 1, 'the pass to be counted', 10_000);
    const samples = await scrape(url);
    assert.is(sumOf(samples, 'relay_domain_rechecks_total', { result: 'wrong' }), 2);
    assert.is(sumOf(samples, 'relay_domain_rechecks_total', { result: 'passed' }), 0);
    assert.is(sumOf(samples, 'relay_domains_failed_total'), 1);
    assert.is(sumOf(samples, 'relay_domain_recheck_runs_total', { result: 'failed' }), 0);
    assert.is((await relay.stop()).code, 0);
    relay = null;

    const stores = await openStores(loadConfig({ ...env, RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
    try {
      const byName = new Map((await domainsOf(stores.documents).find({})).map((d) => [d.name, d]));
      assert.is(byName.get('expiring.test')?.status, 'failed');
      assert.is(byName.get('lapsing.test')?.status, 'verified');
    } finally {
      await stores.close();
    }
  } finally {
    await relay?.kill();
    await dns.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

part.run();
