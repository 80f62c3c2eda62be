// A DKIM key record can restrict its own use (RFC 6376 3.6.1): h= lists the hash algorithms it
// may be used with (a verifier MUST ignore the record when the signature's is not listed, 6.1.2)
// and s= the service types (a record listing neither "email" nor "*" MUST be ignored for mail).
// Relay signs rsa-sha256 for email, so a record holding the right key with h=sha1 or s=<other>
// fails every signature at receivers: domain verification reports DKIM as a mismatch, and the
// domain unverified. Real DNS server; Relay's resolver and verifier; Relay's signer; mailauth's
// DKIM verifier (what a receiver does) asking the same DNS server.
import { Resolver } from 'node:dns/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { splitTxtValue, type SendingDomainSettings } from '../domain/sending-domain.ts';
import { generateDkimKeyPair, type DkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { createDnsLookup } from '../infra/dns/resolver.ts';
import { verifySendingDomain } from '../infra/dns/verify-domain.ts';
import { dkimSign } from '../infra/mail/dkim-sign.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';

const DOMAIN = 'example.test';
const MX_HOST = 'feedback.relay.test';

interface Context { dns: TestDnsServer; key: DkimKeyPair; settings: SendingDomainSettings }

const test = suite<Context>('DKIM key records that restrict their own use');

test.before(async (ctx) => {
  ctx.key = await generateDkimKeyPair();
  ctx.settings = { domain: DOMAIN, dkimSelector: ctx.key.selector, dkimPublicKeyBase64: ctx.key.publicKeyBase64, mailFromSubdomain: 'bounce', mxHost: MX_HOST };
  ctx.dns = await startDnsServer([]);
});

test.after(async (ctx) => {
  await ctx.dns.close();
});

function zone(ctx: Context, dkimValue: string): ZoneRecord[] {
  return [
    { name: `${ctx.key.selector}._domainkey.${DOMAIN}`, type: 'TXT', data: splitTxtValue(dkimValue) },
    { name: `bounce.${DOMAIN}`, type: 'MX', data: { preference: 10, exchange: MX_HOST } },
    { name: `bounce.${DOMAIN}`, type: 'TXT', data: `v=spf1 a:${MX_HOST} ~all` },
  ];
}

/** What a receiver makes of a message Relay signed with the domain's key. */
async function receiverVerdict(ctx: Context): Promise<string> {
  const raw = Buffer.from(`From: app@${DOMAIN}\r\nTo: you@example.org\r\nSubject: hi\r\nDate: Mon, 01 Jan 2024 00:00:00 +0000\r\nMessage-ID: <1@${DOMAIN}>\r\n\r\nHello\r\n`);
  const signed = dkimSign(raw, { domainName: DOMAIN, keySelector: ctx.key.selector, privateKey: ctx.key.privateKeyPem, headerFieldNames: ['from', 'to', 'subject', 'date', 'message-id'], oversigned: ['from'] });
  const resolver = new Resolver();
  resolver.setServers([ctx.dns.address]);
  const result = await dkimVerify(signed, { resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT') });
  return result.results[0]?.status?.result ?? 'none';
}

async function relayCheck(ctx: Context): Promise<{ verified: boolean; dkim: string }> {
  const result = await verifySendingDomain(ctx.settings, createDnsLookup([ctx.dns.address], { timeoutMs: 1000, tries: 1 }));
  return { verified: result.verified, dkim: result.checks.find((c) => c.purpose === 'dkim')!.status };
}

test('control: the record as Relay asks for it verifies in Relay and passes at the receiver', async (ctx) => {
  ctx.dns.setZone(zone(ctx, `v=DKIM1; k=rsa; p=${ctx.key.publicKeyBase64}`));
  assert.equal(await relayCheck(ctx), { verified: true, dkim: 'ok' });
  assert.is(await receiverVerdict(ctx), 'pass');
});

for (const [what, restriction] of [['h=sha1 (only SHA-1 allowed)', 'h=sha1'], ['s=tlsrpt (not for email)', 's=tlsrpt']] as const) {
  test(`the right key with ${what}: receivers fail every signature, so Relay must not call it ok`, async (ctx) => {
    ctx.dns.setZone(zone(ctx, `v=DKIM1; k=rsa; ${restriction}; p=${ctx.key.publicKeyBase64}`));
    const verdict = await receiverVerdict(ctx);
    assert.is.not(verdict, 'pass', 'the receiver ignores the key record');
    const relay = await relayCheck(ctx);
    assert.is(relay.dkim, 'mismatch', `Relay says DKIM ${relay.dkim} (domain verified: ${relay.verified}) while the receiver says ${verdict}`);
    assert.is(relay.verified, false);
  });
}

test.run();
