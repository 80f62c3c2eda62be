// A MAIL FROM SPF record whose evaluation makes more than two void lookups (a, mx or exists
// terms naming hosts that no longer exist, before Relay's mechanism, in the record or in one it
// includes) is reported as a mismatch and the domain is not verified, as receivers answer it
// with a permanent error, so no mail from Relay passes SPF.
//
// Why it matters: RFC 7208 4.6.4: "SPF implementations SHOULD limit 'void lookups' to two ...
// Exceeding the limit produces a 'permerror' result" (a void lookup: NXDOMAIN, or an answer
// with no records). Receivers apply it (pyspf behind Postfix's policyd-spf, mailauth, below),
// and records with stale `a:`/`mx:` hosts are common, particularly in a company-wide record
// included from the MAIL FROM one. Were Relay to say "SPF ok" ("SPF as receivers evaluate it",
// ARCHITECTURE.md; it applies the 10-lookup limit of the same section too), the customer would
// have no reason to look while SPF, hence SPF-based DMARC alignment, failed for every message.
//
// What is checked: verification looks up (A and AAAA, or MX) the targets of the a, mx and
// exists terms a receiver evaluates before reaching Relay's mechanism, counts those that come
// back NXDOMAIN or empty, and reports the SPF check as a mismatch (permanent error, too many
// void lookups) once there are more than two; the domain is then not verified. The control:
// the same records with the hosts still in DNS verify. mailauth's SPF evaluation (what a
// receiver does) against the same DNS server shows the permerror.
//
// Through the real API (POST /v1/workspaces/:id/domains, POST /v1/domains/:id/verify) against
// a DNS server the test starts.
import { Resolver } from 'node:dns/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spf as receiverSpf } from 'mailauth/lib/spf/index.js';
import type { DomainView } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const MAIL_HOST = 'mx.relay.test';
const RELAY = `a:${MAIL_HOST}`;
/** The mail host's address: where Relay's mail comes from (`a:<mail host>`). */
const RELAY_IP = '192.0.2.25';
const DOMAIN = 'acme.test';
/** Hosts the customer's records still name, gone from DNS (NXDOMAIN). */
const STALE = `a:old-crm.${DOMAIN} a:old-mail.${DOMAIN} mx:old-helpdesk.${DOMAIN}`;

interface Ctx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
}

const test = suite<Ctx>('SPF records that exceed the void lookup limit');

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

/** The records as instructed, but the MAIL FROM SPF record is `spf`; the customer's other records; the mail host's address. */
function publish(ctx: Ctx, domain: DomainView, spf: string, more: ZoneRecord[]): void {
  const records = domain.records.map((r): ZoneRecord => {
    if (r.type === 'MX') return { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } };
    return { name: r.name, type: 'TXT', data: r.purpose === 'mail_from_spf' ? spf : r.txtStrings ?? r.value };
  });
  ctx.dns.setZone([...records, ...more, { name: MAIL_HOST, type: 'A', data: RELAY_IP }]);
}

/** What a receiver's SPF check says of mail from Relay's address with a return path at the MAIL FROM domain, and why. */
async function receiverVerdict(ctx: Ctx, domain: DomainView): Promise<{ result: string; comment?: string }> {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([ctx.dns.address]);
  const result = await receiverSpf({
    sender: `rr-test@${domain.mailFromDomain}`, ip: RELAY_IP, helo: MAIL_HOST, mta: 'mx.receiver.test',
    resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT'),
  });
  return { result: result.status.result, comment: result.status.comment };
}

const spfCheck = (domain: DomainView) => domain.checks!.find((c) => c.purpose === 'mail_from_spf')!;

const CASES: Array<[string, string, ZoneRecord[]]> = [
  ['in the MAIL FROM record', `v=spf1 ${STALE} ${RELAY} -all`, []],
  ['in the company record it includes', `v=spf1 include:_spf.${DOMAIN} ${RELAY} -all`, [{ name: `_spf.${DOMAIN}`, type: 'TXT', data: `v=spf1 ip4:198.51.100.0/24 ${STALE} -all` }]],
];

test('control: the same records with the stale hosts still in DNS pass at the receiver and verify', async (ctx) => {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: DOMAIN } });
  const domain = created.json() as DomainView;
  const [, spf, more] = CASES[1];
  const hosts: ZoneRecord[] = ['old-crm', 'old-mail'].map((h) => ({ name: `${h}.${DOMAIN}`, type: 'A', data: '198.51.100.7' }));
  publish(ctx, domain, spf, [...more, ...hosts, { name: `old-helpdesk.${DOMAIN}`, type: 'MX', data: { preference: 10, exchange: `old-mail.${DOMAIN}` } }]);
  assert.is((await receiverVerdict(ctx, domain)).result, 'pass');
  const seen = (await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner })).json() as DomainView;
  assert.is(seen.status, 'verified', spfCheck(seen).message);
});

for (const [where, spf, more] of CASES) {
  test(`given three void lookups ${where} before Relay's mechanism, when verified, then SPF is a mismatch as receivers answer permerror`, async (ctx) => {
    const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: DOMAIN } });
    assert.is(created.statusCode, 201, created.body);
    const domain = created.json() as DomainView;
    publish(ctx, domain, spf, more);
    const verdict = await receiverVerdict(ctx, domain);
    assert.is(verdict.result, 'permerror', 'receivers answer a permanent error');
    assert.match(verdict.comment ?? '', /void/i);

    const response = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
    assert.is(response.statusCode, 200, response.body);
    const seen = response.json() as DomainView;
    assert.is(spfCheck(seen).status, 'mismatch', `Relay says SPF ${spfCheck(seen).status}: ${spfCheck(seen).message}`);
    assert.match(spfCheck(seen).message, /void/i);
    assert.is.not(seen.status, 'verified');
  });
}

test.run();
