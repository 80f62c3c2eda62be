// A DMARC record with a valid policy and one stray part that is no tag=value (a second report
// address written after a ";" instead of a ",", a tag name left without its value) is judged by
// its policy, as receivers judge it: RFC 7489 6.3 says "syntax errors in the remainder of the
// record SHOULD be discarded", OpenDMARC's parser skips such a part, and mailauth (asked here on
// the same DNS) applies the record's p=reject. Calling it malformed would tell a customer
// protected by p=reject that no policy applies, and advise p=none, switching enforcement off.
import * as assert from 'uvu/assert';
import { dmarc as receiverDmarc } from 'mailauth/lib/dmarc/index.js';
import { checkOf, createDomain, domainCheckSuite, publishDomain, receiverResolver, verifyDomain, type DomainCheckCtx } from './support/domain-checks.ts';

const DOMAIN = 'acme.test';

const test = domainCheckSuite('a DMARC record with a stray part that is no tag=value');

/** The policy a receiver applies to mail whose From is at `domain` (mailauth, strict RFC parsing or not). */
async function receiverPolicy(ctx: DomainCheckCtx, domain: string, strict: boolean): Promise<string | undefined> {
  const result = await receiverDmarc({ headerFrom: `hello@${domain}`, spfDomains: [], dkimDomains: [], strict, resolver: receiverResolver(ctx) });
  return result ? result.policy : undefined;
}

const RECORDS = [
  // A second report address after ";" (meant as ","): the most common slip in real records.
  'v=DMARC1; p=reject; rua=mailto:dmarc@acme.test; mailto:postmaster@acme.test',
  // A tag name left without its value.
  'v=DMARC1; p=reject; adkim',
];

for (const record of RECORDS) {
  test(`given "${record}", whose p=reject receivers apply, when verified, then DMARC is ok naming p=reject, not "malformed" with advice to publish p=none`, async (ctx) => {
    const domain = await createDomain(ctx, DOMAIN);
    publishDomain(ctx, domain, { txtFor: { dmarc: record }, more: [{ name: DOMAIN, type: 'A', data: '192.0.2.80' }] });
    assert.is(await receiverPolicy(ctx, DOMAIN, false), 'reject', 'a receiver applies p=reject');
    assert.is(await receiverPolicy(ctx, DOMAIN, true), 'reject', 'a receiver parsing by the RFC applies p=reject');

    const check = checkOf(await verifyDomain(ctx, domain), 'dmarc');
    assert.not.match(check.message, 'Recommended: v=DMARC1; p=none', `Relay advises replacing a p=reject record with p=none: ${check.message}`);
    assert.is(check.status, 'ok', `Relay says DMARC ${check.status}: ${check.message}`);
    assert.match(check.message, 'p=reject');
  });
}

test.run();
