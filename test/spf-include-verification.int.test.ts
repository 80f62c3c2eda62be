// A MAIL FROM SPF record that authorises Relay through include: or redirect=, verified through
// the real API (POST /v1/domains/:id/verify) and the periodic re-check (recheckDomains) against
// a DNS server the test starts: both follow the records as receivers do, tell a record that
// receivers answer with a permanent error (a syntax error anywhere in a record evaluated
// included) from one that authorises Relay, and a lookup that fails from either.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { recheckDomains } from '../apps/services/domain-recheck.ts';
import type { DomainView, RecheckResult } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const HOUR = 3_600_000;
const MAIL_HOST = 'mx.relay.test';
const RELAY = `a:${MAIL_HOST}`;

interface Ctx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
}

/** The records as instructed, but for the MAIL FROM SPF record, which is `spf`, and the customer's other records. */
function publish(ctx: Ctx, domain: DomainView, spf: string, more: ZoneRecord[] = []): void {
  const records = domain.records.map((r): ZoneRecord => {
    if (r.type === 'MX') return { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } };
    return { name: r.name, type: 'TXT', data: r.purpose === 'mail_from_spf' ? spf : r.txtStrings ?? r.value };
  });
  ctx.dns.setZone([...records, ...more]);
}

const txt = (name: string, data: string): ZoneRecord => ({ name, type: 'TXT', data });

async function created(ctx: Ctx, name: string): Promise<DomainView> {
  const response = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name } });
  assert.is(response.statusCode, 201, response.body);
  return response.json() as DomainView;
}

async function verify(ctx: Ctx, domain: DomainView): Promise<DomainView> {
  const response = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(response.statusCode, 200, response.body);
  return response.json() as DomainView;
}

const spfCheck = (domain: DomainView) => domain.checks!.find((c) => c.purpose === 'mail_from_spf')!;

async function pass(ctx: Ctx): Promise<Map<string, RecheckResult>> {
  const results = new Map<string, RecheckResult>();
  await recheckDomains({
    documents: ctx.t.ctx.documents, config: ctx.t.config, dns: ctx.t.ctx.services.dns, policy: ctx.t.config.domainRecheck,
    now: () => ctx.t.clock.now(), onRechecked: (result) => results.set(result.domain.name, result),
  });
  return results;
}

const test = suite<Ctx>('SPF verification follows include: and redirect=');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
});

test.after(async (ctx) => {
  await ctx.dns.close();
});

test.before.each(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: MAIL_HOST });
  ctx.t.clock.freeze();
  ctx.owner = await newCaller(ctx.t, 'owner@acme.test');
  ({ workspaceId: ctx.workspaceId } = await workspaceWithProject(ctx.t, ctx.owner));
});

test.after.each(async (ctx) => {
  await ctx.t.close();
});

test('given Relay authorised by a record the MAIL FROM SPF includes, when verified through the API, then the domain is verified', async (ctx) => {
  const domain = await created(ctx, 'nested.test');
  publish(ctx, domain, 'v=spf1 include:_spf.nested.test ~all', [txt('_spf.nested.test', `v=spf1 ip4:192.0.2.1 ${RELAY} ~all`)]);
  const seen = await verify(ctx, domain);
  assert.is(spfCheck(seen).status, 'ok', spfCheck(seen).message);
  assert.match(spfCheck(seen).message, `${RELAY} through include:_spf.nested.test`);
  assert.is(seen.status, 'verified');
});

test('given Relay authorised through redirect=, when verified through the API, then the domain is verified', async (ctx) => {
  const domain = await created(ctx, 'redirected.test');
  publish(ctx, domain, 'v=spf1 redirect=_spf.redirected.test', [txt('_spf.redirected.test', `v=spf1 ${RELAY} -all`)]);
  const seen = await verify(ctx, domain);
  assert.is(spfCheck(seen).status, 'ok', spfCheck(seen).message);
  assert.is(seen.status, 'verified');
});

test('given records receivers answer with a permanent error, when verified through the API, then SPF is a mismatch saying why and the domain fails', async (ctx) => {
  const chain = Array.from({ length: 11 }, (_, i) => txt(`_c${i}.limits.test`, `v=spf1 include:_c${i + 1}.limits.test -all`));
  const cases: Array<[string, string, ZoneRecord[], string]> = [
    ['limits.test', 'v=spf1 include:_c0.limits.test ~all', [...chain, txt('_c11.limits.test', `v=spf1 ${RELAY} -all`)], 'more than 10 DNS lookups'],
    ['loops.test', 'v=spf1 include:_a.loops.test ~all', [txt('_a.loops.test', 'v=spf1 include:_b.loops.test -all'), txt('_b.loops.test', 'v=spf1 include:_a.loops.test -all')], 'loops back'],
    ['twice.test', 'v=spf1 include:_spf.twice.test ~all', [txt('_spf.twice.test', `v=spf1 ${RELAY} -all`), txt('_spf.twice.test', 'v=spf1 -all')], '2 SPF records at _spf.twice.test'],
    // RFC 7208 4.6: a syntax error anywhere in the record, even after Relay's mechanism.
    ['typo.test', `v=spf1 ipv4:192.0.2.1 ${RELAY} ~all`, [], 'syntax error: ipv4:192.0.2.1 is no SPF mechanism'],
    ['badip.test', `v=spf1 ${RELAY} ip4:192.0.2.300 ~all`, [], 'syntax error: ip4:192.0.2.300 does not name an IPv4 address'],
    ['nested-typo.test', 'v=spf1 include:_spf.nested-typo.test ~all', [txt('_spf.nested-typo.test', `v=spf1 ${RELAY} ip6:2001:db8::g -all`)], 'syntax error: ip6:2001:db8::g'],
  ];
  for (const [name, spf, more, says] of cases) {
    const domain = await created(ctx, name);
    publish(ctx, domain, spf, more);
    const seen = await verify(ctx, domain);
    assert.is(spfCheck(seen).status, 'mismatch', name);
    assert.match(spfCheck(seen).message, says, name);
    assert.match(spfCheck(seen).message, 'permanent error', name);
    assert.is(seen.status, 'failed', name);
  }
});

test('given an included name whose lookup fails (SERVFAIL), when verified through the API, then SPF is an error, not a mismatch, and the domain stays pending', async (ctx) => {
  const domain = await created(ctx, 'flaky-include.test');
  publish(ctx, domain, 'v=spf1 include:_spf.flaky-include.test ~all', [{ name: '_spf.flaky-include.test', type: 'SERVFAIL' }]);
  const seen = await verify(ctx, domain);
  assert.is(spfCheck(seen).status, 'error');
  assert.match(spfCheck(seen).message, /_spf\.flaky-include\.test.*ESERVFAIL/);
  assert.is(seen.status, 'pending');
});

test('given a domain verified through a nested include, when re-checked, then it passes; a failing lookup of the include counts for nothing; a wrong one counts', async (ctx) => {
  const domain = await created(ctx, 'kept.test');
  const spf = 'v=spf1 include:_spf.kept.test ~all';
  publish(ctx, domain, spf, [txt('_spf.kept.test', `v=spf1 include:_inner.kept.test ~all`), txt('_inner.kept.test', `v=spf1 ${RELAY} ~all`)]);
  assert.is((await verify(ctx, domain)).status, 'verified');

  ctx.t.clock.advance(6 * HOUR);
  assert.is((await pass(ctx)).get(domain.name)?.verdict, 'passed');

  publish(ctx, domain, spf, [txt('_spf.kept.test', `v=spf1 include:_inner.kept.test ~all`), { name: '_inner.kept.test', type: 'SERVFAIL' }]);
  ctx.t.clock.advance(6 * HOUR);
  const inconclusive = (await pass(ctx)).get(domain.name);
  assert.is(inconclusive?.verdict, 'inconclusive');
  assert.is(inconclusive?.outcome.change, 'none');

  publish(ctx, domain, spf, [txt('_spf.kept.test', `v=spf1 include:_inner.kept.test ~all`), txt('_inner.kept.test', 'v=spf1 ip4:192.0.2.1 ~all')]);
  ctx.t.clock.advance(6 * HOUR);
  const wrong = (await pass(ctx)).get(domain.name);
  assert.is(wrong?.verdict, 'wrong');
  assert.equal(wrong?.wrong.map((w) => [w.purpose, w.status]), [['mail_from_spf', 'mismatch']]);
});

test.run();
