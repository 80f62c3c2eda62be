// A DMARC record with a valid policy and one stray part that is no tag=value (a second report
// address written after a ";" instead of a ",", a tag name left without its value) is judged by
// its policy, as receivers judge it: RFC 7489 6.3 says "syntax errors in the remainder of the
// record SHOULD be discarded", OpenDMARC's parser skips such a part, and mailauth (asked here on
// the same DNS) applies the record's p=reject. Calling it malformed would tell a customer
// protected by p=reject that no policy applies, and advise p=none, switching enforcement off.
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

const test = suite<Ctx>('a DMARC record with a stray part that is no tag=value');

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

/** The policy a receiver applies to mail whose From is at `domain` (mailauth, strict RFC parsing). */
async function receiverPolicy(ctx: Ctx, domain: string, strict: boolean): Promise<string | undefined> {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([ctx.dns.address]);
  const result = await receiverDmarc({
    headerFrom: `hello@${domain}`, spfDomains: [], dkimDomains: [], strict,
    resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT'),
  });
  return result ? result.policy : undefined;
}

const dmarcCheck = (domain: DomainView) => domain.checks!.find((c) => c.purpose === 'dmarc')!;

const RECORDS = [
  // A second report address after ";" (meant as ","): the most common slip in real records.
  'v=DMARC1; p=reject; rua=mailto:dmarc@acme.test; mailto:postmaster@acme.test',
  // A tag name left without its value.
  'v=DMARC1; p=reject; adkim',
];

for (const record of RECORDS) {
  test(`given "${record}", whose p=reject receivers apply, when verified, then DMARC is ok naming p=reject, not "malformed" with advice to publish p=none`, async (ctx) => {
    const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: DOMAIN } });
    assert.is(created.statusCode, 201, created.body);
    const domain = created.json() as DomainView;
    publish(ctx, domain, record);
    assert.is(await receiverPolicy(ctx, DOMAIN, false), 'reject', 'a receiver applies p=reject');
    assert.is(await receiverPolicy(ctx, DOMAIN, true), 'reject', 'a receiver parsing by the RFC applies p=reject');

    const verified = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
    assert.is(verified.statusCode, 200, verified.body);
    const check = dmarcCheck(verified.json() as DomainView);
    assert.not.match(check.message, 'Recommended: v=DMARC1; p=none', `Relay advises replacing a p=reject record with p=none: ${check.message}`);
    assert.is(check.status, 'ok', `Relay says DMARC ${check.status}: ${check.message}`);
    assert.match(check.message, 'p=reject');
  });
}

test.run();
