// A MAIL FROM SPF record that authorises Relay through the `mx` mechanism (`v=spf1 mx -all`,
// or `mx:<MAIL FROM domain>`, at bounce.<domain>) verifies, as every receiver passes Relay's
// mail with it.
//
// Why it matters: `v=spf1 mx -all` is the most common way of writing SPF, and at the MAIL FROM
// name it says exactly what Relay asks for. RFC 7208 5.4: `mx` with no domain-spec means the
// MX hosts of the <domain> being checked, the MAIL FROM domain bounce.<domain>; Relay requires
// (and checks) that this MX be RELAY_MAIL_HOST, so `mx` there authorises the addresses of the
// mail host, the same addresses as the `a:<mail host>` Relay asks for (RFC 7208 5.3). Refusing
// it would leave such a customer's domain unverified (or fail it at the next check), unable to
// send, with a message saying the record "does not authorise a:<mail host>".
//
// What is checked: "SPF as receivers evaluate it" (ARCHITECTURE.md): an `mx` term with a pass
// qualifier in the MAIL FROM record itself (or `mx:<MAIL FROM domain>`), reached before any
// "all", authorises Relay when the MAIL FROM MX that verification checks points to the mail
// host, so the SPF check is ok and the domain verified; the control, the record as Relay asks
// for it, verifies too. mailauth's SPF evaluation (what a receiver does) against the same DNS
// server shows that receivers pass it.
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
/** The mail host's address: where Relay's mail comes from (a self-hosted Relay, `a:<mail host>`). */
const RELAY_IP = '192.0.2.25';

interface Ctx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
}

const test = suite<Ctx>('an SPF record that authorises Relay through the mx mechanism');

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

/** The records as instructed, but the MAIL FROM SPF record is `spf`; and the mail host's address. */
function publish(ctx: Ctx, domain: DomainView, spf: string): void {
  const records = domain.records.map((r): ZoneRecord => {
    if (r.type === 'MX') return { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } };
    return { name: r.name, type: 'TXT', data: r.purpose === 'mail_from_spf' ? spf : r.txtStrings ?? r.value };
  });
  ctx.dns.setZone([...records, { name: MAIL_HOST, type: 'A', data: RELAY_IP }]);
}

/** What a receiver's SPF check says of mail from Relay's address with a return path at the MAIL FROM domain. */
async function receiverVerdict(ctx: Ctx, domain: DomainView): Promise<string> {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([ctx.dns.address]);
  const result = await receiverSpf({
    sender: `rr-test@${domain.mailFromDomain}`, ip: RELAY_IP, helo: MAIL_HOST, mta: 'mx.receiver.test',
    resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT'),
  });
  return result.status.result;
}

async function createdAndVerified(ctx: Ctx, name: string, spf: string): Promise<{ domain: DomainView; seen: DomainView }> {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name } });
  assert.is(created.statusCode, 201, created.body);
  const domain = created.json() as DomainView;
  publish(ctx, domain, spf);
  const verified = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(verified.statusCode, 200, verified.body);
  return { domain, seen: verified.json() as DomainView };
}

const spfCheck = (domain: DomainView) => domain.checks!.find((c) => c.purpose === 'mail_from_spf')!;

test('control: the SPF record as Relay asks for it (a:<mail host>) passes at the receiver and verifies', async (ctx) => {
  const { domain, seen } = await createdAndVerified(ctx, 'control.test', `v=spf1 a:${MAIL_HOST} -all`);
  assert.is(await receiverVerdict(ctx, domain), 'pass');
  assert.is(seen.status, 'verified', spfCheck(seen).message);
});

for (const spf of ['v=spf1 mx -all', 'v=spf1 mx ~all', 'v=spf1 mx:bounce.mx-spf.test -all']) {
  test(`given "${spf}" at the MAIL FROM domain, whose MX is the mail host, then receivers pass Relay and so must verification`, async (ctx) => {
    const { domain, seen } = await createdAndVerified(ctx, 'mx-spf.test', spf);
    assert.is(await receiverVerdict(ctx, domain), 'pass', 'receivers authorise the mail host through mx');
    assert.is(spfCheck(seen).status, 'ok', `Relay says SPF ${spfCheck(seen).status}: ${spfCheck(seen).message}`);
    assert.is(seen.status, 'verified');
  });
}

test.run();
