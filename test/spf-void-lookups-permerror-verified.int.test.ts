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
import * as assert from 'uvu/assert';
import { spf as receiverSpf } from 'mailauth/lib/spf/index.js';
import type { DomainView } from '../apps/services/management/domains.ts';
import type { ZoneRecord } from './support/dns-server.ts';
import { checkOf, createDomain, domainCheckSuite, MAIL_HOST, publishDomain, receiverResolver, verifyDomain, type DomainCheckCtx } from './support/domain-checks.ts';

const RELAY = `a:${MAIL_HOST}`;
/** The mail host's address: where Relay's mail comes from (`a:<mail host>`). */
const RELAY_IP = '192.0.2.25';
const DOMAIN = 'acme.test';
/** Hosts the customer's records still name, gone from DNS (NXDOMAIN). */
const STALE = `a:old-crm.${DOMAIN} a:old-mail.${DOMAIN} mx:old-helpdesk.${DOMAIN}`;

const test = domainCheckSuite('SPF records that exceed the void lookup limit');

/** What a receiver's SPF check says of mail from Relay's address with a return path at the MAIL FROM domain, and why. */
async function receiverVerdict(ctx: DomainCheckCtx, domain: DomainView): Promise<{ result: string; comment?: string }> {
  const result = await receiverSpf({
    sender: `rr-test@${domain.mailFromDomain}`, ip: RELAY_IP, helo: MAIL_HOST, mta: 'mx.receiver.test', resolver: receiverResolver(ctx),
  });
  return { result: result.status.result, comment: result.status.comment };
}

/** The records as instructed, but the MAIL FROM SPF record is `spf`; the customer's other records; the mail host's address. */
function publish(ctx: DomainCheckCtx, domain: DomainView, spf: string, more: ZoneRecord[]): void {
  publishDomain(ctx, domain, { txtFor: { mail_from_spf: spf }, more: [...more, { name: MAIL_HOST, type: 'A', data: RELAY_IP }] });
}

const spfCheck = (domain: DomainView) => checkOf(domain, 'mail_from_spf');

const CASES: Array<[string, string, ZoneRecord[]]> = [
  ['in the MAIL FROM record', `v=spf1 ${STALE} ${RELAY} -all`, []],
  ['in the company record it includes', `v=spf1 include:_spf.${DOMAIN} ${RELAY} -all`, [{ name: `_spf.${DOMAIN}`, type: 'TXT', data: `v=spf1 ip4:198.51.100.0/24 ${STALE} -all` }]],
];

test('control: the same records with the stale hosts still in DNS pass at the receiver and verify', async (ctx) => {
  const domain = await createDomain(ctx, DOMAIN);
  const [, spf, more] = CASES[1];
  const hosts: ZoneRecord[] = ['old-crm', 'old-mail'].map((h) => ({ name: `${h}.${DOMAIN}`, type: 'A', data: '198.51.100.7' }));
  publish(ctx, domain, spf, [...more, ...hosts, { name: `old-helpdesk.${DOMAIN}`, type: 'MX', data: { preference: 10, exchange: `old-mail.${DOMAIN}` } }]);
  assert.is((await receiverVerdict(ctx, domain)).result, 'pass');
  const seen = await verifyDomain(ctx, domain);
  assert.is(seen.status, 'verified', spfCheck(seen).message);
});

for (const [where, spf, more] of CASES) {
  test(`given three void lookups ${where} before Relay's mechanism, when verified, then SPF is a mismatch as receivers answer permerror`, async (ctx) => {
    const domain = await createDomain(ctx, DOMAIN);
    publish(ctx, domain, spf, more);
    const verdict = await receiverVerdict(ctx, domain);
    assert.is(verdict.result, 'permerror', 'receivers answer a permanent error');
    assert.match(verdict.comment ?? '', /void/i);

    const seen = await verifyDomain(ctx, domain);
    assert.is(spfCheck(seen).status, 'mismatch', `Relay says SPF ${spfCheck(seen).status}: ${spfCheck(seen).message}`);
    assert.match(spfCheck(seen).message, /void/i);
    assert.is.not(seen.status, 'verified');
  });
}

test.run();
