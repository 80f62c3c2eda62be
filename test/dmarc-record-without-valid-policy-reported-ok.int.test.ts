// A DMARC record that begins with "v=DMARC1" but holds no valid policy (no p= tag, or a p=
// receivers do not know: `p=rejct`, `p=block`) is not reported ok by Relay's DMARC check: it
// is a mismatch that names p=, and the domain's verification is unchanged.
//
// Why it matters: receivers give such a record no DMARC processing at all (RFC 7489 6.6.3: a
// record whose p= is missing or invalid is used, as p=none, only when it asks for aggregate
// reports with a valid rua=; otherwise "Mail Receivers MUST NOT apply DMARC processing"; the
// same in DMARCbis). A customer who published `p=rejct` believes spoofed mail from the domain
// is refused while it is delivered; the records page is the only place Relay's user looks at
// DMARC, so an "ok" there would confirm the mistake.
//
// What is checked: the check is not ok for a record receivers ignore (a mismatch, recommended
// only, so the domain stays verified) and says that p= is missing or invalid (none, quarantine
// or reject); the control, the recommended record, is ok. mailauth's DMARC policy discovery
// (what a receiver does) against the same DNS server shows that no policy applies.
//
// Through the real API (POST /v1/workspaces/:id/domains, POST /v1/domains/:id/verify) against
// a DNS server the test starts.
import { Resolver } from 'node:dns/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { dmarc as receiverDmarc } from 'mailauth/lib/dmarc/index.js';
import type { DomainView } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const MAIL_HOST = 'mx.relay.test';
const DOMAIN = 'acme.test';

interface Ctx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
}

const test = suite<Ctx>('a DMARC record without a valid policy');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
});

test.after(async (ctx) => {
  await ctx.dns.close();
});

test.before.each(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: MAIL_HOST });
  ctx.owner = await newCaller(ctx.t, 'owner@acme.test');
  ({ workspaceId: ctx.workspaceId } = await workspaceWithProject(ctx.t, ctx.owner));
});

test.after.each(async (ctx) => {
  await ctx.t.close();
});

/** The records as instructed, but the DMARC record is `dmarc`. */
function publish(ctx: Ctx, domain: DomainView, dmarc: string): void {
  ctx.dns.setZone([{ name: DOMAIN, type: 'A', data: '192.0.2.80' }, ...domain.records.map((r): ZoneRecord => {
    if (r.type === 'MX') return { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } };
    return { name: r.name, type: 'TXT', data: r.purpose === 'dmarc' ? dmarc : r.txtStrings ?? r.value };
  })]);
}

/** The DMARC result of a receiver for mail whose From is at `domain` (`none`: no DMARC processing), with the policy it applies. */
async function receiverPolicy(ctx: Ctx, domain: string): Promise<{ result?: string; policy?: string }> {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([ctx.dns.address]);
  const result = await receiverDmarc({ headerFrom: `hello@${domain}`, spfDomains: [], dkimDomains: [], resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT') });
  return result ? { result: result.status.result, policy: result.policy } : {};
}

async function checked(ctx: Ctx, dmarc: string): Promise<DomainView> {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: DOMAIN } });
  assert.is(created.statusCode, 201, created.body);
  const domain = created.json() as DomainView;
  publish(ctx, domain, dmarc);
  const verified = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(verified.statusCode, 200, verified.body);
  return verified.json() as DomainView;
}

const dmarcCheck = (domain: DomainView) => domain.checks!.find((c) => c.purpose === 'dmarc')!;

test('control: the recommended record is ok and receivers apply it', async (ctx) => {
  const seen = await checked(ctx, 'v=DMARC1; p=none;');
  assert.equal(await receiverPolicy(ctx, DOMAIN), { result: 'fail', policy: 'none' }, 'receivers apply p=none (the mail here is unauthenticated)');
  assert.is(dmarcCheck(seen).status, 'ok');
});

for (const record of ['v=DMARC1; p=rejct', 'v=DMARC1; p=block; pct=100', 'v=DMARC1; pct=100; adkim=s']) {
  test(`given "${record}", which receivers ignore, when verified, then DMARC is not reported ok (the domain stays verified)`, async (ctx) => {
    const seen = await checked(ctx, record);
    assert.equal(await receiverPolicy(ctx, DOMAIN), { result: 'none', policy: undefined }, 'receivers apply no DMARC processing');
    assert.is(seen.status, 'verified', 'DMARC is recommended only');
    const dmarc = dmarcCheck(seen);
    assert.is.not(dmarc.status, 'ok', `Relay says DMARC ok: ${dmarc.message}`);
    assert.match(dmarc.message, /p=/);
  });
}

test.run();
