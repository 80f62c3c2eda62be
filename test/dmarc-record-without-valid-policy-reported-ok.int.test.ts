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
import * as assert from 'uvu/assert';
import { dmarc as receiverDmarc } from 'mailauth/lib/dmarc/index.js';
import type { DomainView } from '../apps/services/management/domains.ts';
import { checkOf, createDomain, domainCheckSuite, publishDomain, receiverResolver, verifyDomain, type DomainCheckCtx } from './support/domain-checks.ts';

const DOMAIN = 'acme.test';

const test = domainCheckSuite('a DMARC record without a valid policy');

/** The DMARC result of a receiver for mail whose From is at `domain` (`none`: no DMARC processing), with the policy it applies. */
async function receiverPolicy(ctx: DomainCheckCtx, domain: string): Promise<{ result?: string; policy?: string }> {
  const result = await receiverDmarc({ headerFrom: `hello@${domain}`, spfDomains: [], dkimDomains: [], resolver: receiverResolver(ctx) });
  return result ? { result: result.status.result, policy: result.policy } : {};
}

/** The domain verified with the instructed records, its DMARC record being `dmarc`. */
async function checked(ctx: DomainCheckCtx, dmarc: string): Promise<DomainView> {
  const domain = await createDomain(ctx, DOMAIN);
  publishDomain(ctx, domain, { txtFor: { dmarc }, more: [{ name: DOMAIN, type: 'A', data: '192.0.2.80' }] });
  return verifyDomain(ctx, domain);
}

test('control: the recommended record is ok and receivers apply it', async (ctx) => {
  const seen = await checked(ctx, 'v=DMARC1; p=none;');
  assert.equal(await receiverPolicy(ctx, DOMAIN), { result: 'fail', policy: 'none' }, 'receivers apply p=none (the mail here is unauthenticated)');
  assert.is(checkOf(seen, 'dmarc').status, 'ok');
});

for (const record of ['v=DMARC1; p=rejct', 'v=DMARC1; p=block; pct=100', 'v=DMARC1; pct=100; adkim=s']) {
  test(`given "${record}", which receivers ignore, when verified, then DMARC is not reported ok (the domain stays verified)`, async (ctx) => {
    const seen = await checked(ctx, record);
    assert.equal(await receiverPolicy(ctx, DOMAIN), { result: 'none', policy: undefined }, 'receivers apply no DMARC processing');
    assert.is(seen.status, 'verified', 'DMARC is recommended only');
    const dmarc = checkOf(seen, 'dmarc');
    assert.is.not(dmarc.status, 'ok', `Relay says DMARC ok: ${dmarc.message}`);
    assert.match(dmarc.message, /p=/);
  });
}

test.run();
