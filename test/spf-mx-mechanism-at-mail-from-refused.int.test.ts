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
import * as assert from 'uvu/assert';
import { spf as receiverSpf } from 'mailauth/lib/spf/index.js';
import type { DomainView } from '../apps/services/management/domains.ts';
import { checkOf, createDomain, domainCheckSuite, MAIL_HOST, publishDomain, receiverResolver, verifyDomain, type DomainCheckCtx } from './support/domain-checks.ts';

/** The mail host's address: where Relay's mail comes from (a self-hosted Relay, `a:<mail host>`). */
const RELAY_IP = '192.0.2.25';

const test = domainCheckSuite('an SPF record that authorises Relay through the mx mechanism');

/** What a receiver's SPF check says of mail from Relay's address with a return path at the MAIL FROM domain, and why. */
async function receiverVerdict(ctx: DomainCheckCtx, domain: DomainView): Promise<{ result: string; comment?: string }> {
  const result = await receiverSpf({
    sender: `rr-test@${domain.mailFromDomain}`, ip: RELAY_IP, helo: MAIL_HOST, mta: 'mx.receiver.test', resolver: receiverResolver(ctx),
  });
  return { result: result.status.result, comment: result.status.comment };
}

/** The domain verified with the instructed records, its MAIL FROM SPF record being `spf`, and the mail host's address. */
async function createdAndVerified(ctx: DomainCheckCtx, name: string, spf: string): Promise<{ domain: DomainView; seen: DomainView }> {
  const domain = await createDomain(ctx, name);
  publishDomain(ctx, domain, { txtFor: { mail_from_spf: spf }, more: [{ name: MAIL_HOST, type: 'A', data: RELAY_IP }] });
  return { domain, seen: await verifyDomain(ctx, domain) };
}

const spfCheck = (domain: DomainView) => checkOf(domain, 'mail_from_spf');

test('control: the SPF record as Relay asks for it (a:<mail host>) passes at the receiver and verifies', async (ctx) => {
  const { domain, seen } = await createdAndVerified(ctx, 'control.test', `v=spf1 a:${MAIL_HOST} -all`);
  assert.is((await receiverVerdict(ctx, domain)).result, 'pass');
  assert.is(seen.status, 'verified', spfCheck(seen).message);
});

for (const spf of ['v=spf1 mx -all', 'v=spf1 mx ~all', 'v=spf1 mx:bounce.mx-spf.test -all']) {
  test(`given "${spf}" at the MAIL FROM domain, whose MX is the mail host, then receivers pass Relay and so must verification`, async (ctx) => {
    const { domain, seen } = await createdAndVerified(ctx, 'mx-spf.test', spf);
    assert.is((await receiverVerdict(ctx, domain)).result, 'pass', 'receivers authorise the mail host through mx');
    assert.is(spfCheck(seen).status, 'ok', `Relay says SPF ${spfCheck(seen).status}: ${spfCheck(seen).message}`);
    assert.is(seen.status, 'verified');
  });
}

test.run();
