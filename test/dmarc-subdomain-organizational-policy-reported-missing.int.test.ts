// For a sending domain that is a subdomain (news.acme.test) of an organization whose DMARC
// policy is published at the organizational domain (_dmarc.acme.test: p=reject), Relay's DMARC
// check is ok, naming the organization's policy, and asks for no record at
// _dmarc.news.acme.test.
//
// Why it matters: receivers look for the From domain's record first and, finding none, apply
// the organizational domain's (RFC 7489 6.6.3; its subdomain policy, sp=, when there is one;
// DMARCbis' tree walk finds the same), so the subdomain already has a DMARC policy, here a
// strict one. Telling the customer it has none would be wrong, and the advice harmful: a
// `p=none` record at _dmarc.news.acme.test takes precedence over the organization's p=reject
// for that subdomain, turning enforcement off for exactly the mail Relay sends. Sending from a
// subdomain (news., mail., notifications.) is the usual setup for a transactional provider.
//
// What is checked: when the sending domain has no DMARC record of its own, verification looks
// up the one of its organizational domain (the public suffix list, RFC 7489 3.2) and, when it
// holds a policy, reports the DMARC check ok; the domain is verified. mailauth's DMARC policy
// discovery (what a receiver does) against the same DNS server shows the policy that applies.
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
const ORGANIZATION = 'acme.test';
const SENDING_DOMAIN = `news.${ORGANIZATION}`;

interface Ctx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
}

const test = suite<Ctx>('DMARC of a subdomain sender, inherited from the organizational domain');

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

/** The required records as instructed (not the recommended DMARC one), and the organization's own records. */
function publish(ctx: Ctx, domain: DomainView, organization: ZoneRecord[]): void {
  const records = domain.records.filter((r) => r.required).map((r): ZoneRecord =>
    r.type === 'MX'
      ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
      : { name: r.name, type: 'TXT', data: r.txtStrings ?? r.value });
  ctx.dns.setZone([...records, ...organization]);
}

/** The DMARC policy a receiver applies to mail whose From is at `domain`, and the domain it takes it from. */
async function receiverPolicy(ctx: Ctx, domain: string): Promise<{ policy?: string; policyDomain?: string }> {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([ctx.dns.address]);
  const result = await receiverDmarc({ headerFrom: `hello@${domain}`, spfDomains: [], dkimDomains: [], resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT') });
  return result ? { policy: result.policy, policyDomain: result.policyDomain } : {};
}

async function created(ctx: Ctx): Promise<DomainView> {
  const response = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: SENDING_DOMAIN } });
  assert.is(response.statusCode, 201, response.body);
  return response.json() as DomainView;
}

const dmarcCheck = (domain: DomainView) => domain.checks!.find((c) => c.purpose === 'dmarc')!;

for (const orgRecord of ['v=DMARC1; p=reject', 'v=DMARC1; p=quarantine; sp=reject; rua=mailto:dmarc@acme.test']) {
  test(`given "${orgRecord}" at _dmarc.${ORGANIZATION} and none at _dmarc.${SENDING_DOMAIN}, when verified, then DMARC is ok: receivers apply the organization's policy`, async (ctx) => {
    const domain = await created(ctx);
    publish(ctx, domain, [
      { name: ORGANIZATION, type: 'A', data: '192.0.2.80' },
      { name: `_dmarc.${ORGANIZATION}`, type: 'TXT', data: orgRecord },
    ]);
    assert.equal(await receiverPolicy(ctx, SENDING_DOMAIN), { policy: 'reject', policyDomain: ORGANIZATION }, 'receivers apply the organization\'s policy to the subdomain');

    const response = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
    assert.is(response.statusCode, 200, response.body);
    const seen = response.json() as DomainView;
    assert.is(seen.status, 'verified');
    const dmarc = dmarcCheck(seen);
    assert.is(dmarc.status, 'ok', `Relay says DMARC ${dmarc.status}: ${dmarc.message}`);
  });
}

test.run();
