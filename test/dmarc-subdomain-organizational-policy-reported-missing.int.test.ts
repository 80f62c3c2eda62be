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
import * as assert from 'uvu/assert';
import { dmarc as receiverDmarc } from 'mailauth/lib/dmarc/index.js';
import { checkOf, createDomain, domainCheckSuite, publishDomain, receiverResolver, verifyDomain, type DomainCheckCtx } from './support/domain-checks.ts';

const ORGANIZATION = 'acme.test';
const SENDING_DOMAIN = `news.${ORGANIZATION}`;

const test = domainCheckSuite('DMARC of a subdomain sender, inherited from the organizational domain');

/** The DMARC policy a receiver applies to mail whose From is at `domain`, and the domain it takes it from. */
async function receiverPolicy(ctx: DomainCheckCtx, domain: string): Promise<{ policy?: string; policyDomain?: string }> {
  const result = await receiverDmarc({ headerFrom: `hello@${domain}`, spfDomains: [], dkimDomains: [], resolver: receiverResolver(ctx) });
  return result ? { policy: result.policy, policyDomain: result.policyDomain } : {};
}

for (const orgRecord of ['v=DMARC1; p=reject', 'v=DMARC1; p=quarantine; sp=reject; rua=mailto:dmarc@acme.test']) {
  test(`given "${orgRecord}" at _dmarc.${ORGANIZATION} and none at _dmarc.${SENDING_DOMAIN}, when verified, then DMARC is ok: receivers apply the organization's policy`, async (ctx) => {
    const domain = await createDomain(ctx, SENDING_DOMAIN);
    // The required records as instructed (not the recommended DMARC one), and the organization's own.
    publishDomain(ctx, domain, {
      requiredOnly: true,
      more: [{ name: ORGANIZATION, type: 'A', data: '192.0.2.80' }, { name: `_dmarc.${ORGANIZATION}`, type: 'TXT', data: orgRecord }],
    });
    assert.equal(await receiverPolicy(ctx, SENDING_DOMAIN), { policy: 'reject', policyDomain: ORGANIZATION }, 'receivers apply the organization\'s policy to the subdomain');

    const seen = await verifyDomain(ctx, domain);
    assert.is(seen.status, 'verified');
    const dmarc = checkOf(seen, 'dmarc');
    assert.is(dmarc.status, 'ok', `Relay says DMARC ${dmarc.status}: ${dmarc.message}`);
  });
}

test.run();
