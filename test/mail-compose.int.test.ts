// The composed message against independent readers: mailauth verifies its DKIM signature
// with the key published (exactly as Relay tells customers to) on a real DNS server on
// loopback, and postal-mime parses its headers and bodies back.
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import PostalMime from 'postal-mime';
import type { Address, Email } from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { requiredRecords, splitTxtValue } from '../domain/sending-domain.ts';
import { generateDkimKeyPair } from '../infra/dns/dkim-keys.ts';
import type { DkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { composeMessage, newMessageId } from '../infra/mail/compose.ts';
import type { ComposeInput } from '../infra/mail/compose.ts';
import { awkwardComposeInput, COMPOSE_DOMAIN as DOMAIN, COMPOSE_EMAIL_ID as EMAIL_ID } from './support/compose-input.ts';
import { startDnsServer } from './support/dns-server.ts';
import type { TestDnsServer, ZoneRecord } from './support/dns-server.ts';

const LONG_LINE = `start-${'0123456789'.repeat(199)}-end`;

interface Context {
  server: TestDnsServer;
  key: DkimKeyPair;
  resolver: Resolver;
}

const compose = suite<Context>('composeMessage');

compose.before(async (ctx) => {
  ctx.key = await generateDkimKeyPair();
  const zone = dkimZone(ctx.key);
  assert.equal(zone.map((r) => r.name), [`${ctx.key.selector}._domainkey.${DOMAIN}`]);
  ctx.server = await startDnsServer(zone);
  ctx.resolver = new Resolver({ timeout: 2000, tries: 2 });
  ctx.resolver.setServers([ctx.server.address]);
});

/** The DKIM record Relay tells customers to publish for `key`, as the test DNS server serves it. */
function dkimZone(key: DkimKeyPair): ZoneRecord[] {
  return requiredRecords({
    domain: DOMAIN, dkimSelector: key.selector, dkimPublicKeyBase64: key.publicKeyBase64, mailFromSubdomain: 'bounce', mxHost: 'feedback.relay.test',
  }).filter((r) => r.purpose === 'dkim').map((r) => ({ name: r.name, type: 'TXT', data: splitTxtValue(r.value) }));
}

compose.after(async (ctx) => {
  await ctx.server?.close();
});

function input(ctx: Context, overrides: Partial<ComposeInput> = {}): ComposeInput {
  return awkwardComposeInput(ctx.key, { html: '<p>Hallo <b>Welt</b> — ünïcødé</p>', text: `Hallo Welt — ünïcødé\n${LONG_LINE}\nlast line`, ...overrides });
}

async function verifyDkim(ctx: Context, raw: Buffer | string) {
  // Strict: RFC 6376 as written, so a body hash mismatch is "fail" rather than mailauth's lenient "neutral".
  const result = await dkimVerify(raw, {
    strict: true,
    resolver: (name: string, rrtype: string) => {
      if (rrtype !== 'TXT') throw new Error(`unexpected ${rrtype} lookup for ${name}`);
      return ctx.resolver.resolveTxt(name);
    },
  });
  return result.results;
}

const mailbox = (address: Address | undefined) => (address && 'address' in address ? { name: address.name, address: address.address } : address);
const header = (email: Email, key: string) => email.headers.filter((h) => h.key === key).map((h) => h.value);
const lf = (text: string | undefined) => (text ?? '').replace(/\r\n/g, '\n');

compose('given a full message, when composed and signed, then mailauth verifies the DKIM signature through DNS as pass', async (ctx) => {
  const { raw } = await composeMessage(input(ctx));
  const results = await verifyDkim(ctx, raw);
  assert.is(results.length, 1);
  assert.is(results[0].status.result, 'pass', results[0].info);
  assert.is(results[0].signingDomain, DOMAIN);
  assert.is(results[0].selector, ctx.key.selector);
  assert.is(results[0].algo, 'rsa-sha256');
  assert.is(results[0].format, 'relaxed/relaxed');
  assert.ok(ctx.server.queries.some((q) => q.name.toLowerCase() === `${ctx.key.selector}._domainkey.${DOMAIN}` && q.type === 'TXT'), 'the key came from the DNS server');
});

compose('given a signed message, then DKIM-Signature is the first header and signs the identity and structure headers', async (ctx) => {
  const { raw } = await composeMessage(input(ctx));
  const text = raw.toString('latin1');
  assert.ok(text.startsWith('DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed;'), text.slice(0, 80));
  const signature = /^DKIM-Signature:((?:.*\r\n[ \t].*)*.*)\r\n/.exec(text)?.[1].replace(/\s+/g, '') ?? '';
  const signed = new Set((/(?:^|;)h=([^;]+)/.exec(signature)?.[1] ?? '').toLowerCase().split(':'));
  for (const name of ['from', 'to', 'cc', 'reply-to', 'subject', 'date', 'message-id', 'mime-version', 'content-type', 'list-unsubscribe']) {
    assert.ok(signed.has(name), `h= lacks ${name}: ${[...signed].join(':')}`);
  }
});

compose('given a signed message, when its body or a signed header is altered, then mailauth says fail', async (ctx) => {
  const { raw } = await composeMessage(input(ctx));
  const text = raw.toString('latin1');
  const bodyTampered = text.replace('last line', 'last lime');
  assert.is.not(bodyTampered, text);
  const [body] = await verifyDkim(ctx, Buffer.from(bodyTampered, 'latin1'));
  assert.is(body.status.result, 'fail', body.info);
  const headerTampered = text.replace(/^Reply-To: .*$/m, 'Reply-To: attacker@evil.test');
  assert.is.not(headerTampered, text);
  const [head] = await verifyDkim(ctx, Buffer.from(headerTampered, 'latin1'));
  assert.is(head.status.result, 'fail', head.info);
});

compose('given a full message, when postal-mime parses it, then every header and both bodies come back', async (ctx) => {
  const sent = input(ctx);
  const { raw, messageId } = await composeMessage(sent);
  assert.is(messageId, `${EMAIL_ID}@${DOMAIN}`);
  const email = await PostalMime.parse(raw);
  assert.equal(mailbox(email.from), { name: 'Zoë Ünicode, Ltd', address: 'hello@acme.example' });
  assert.equal(email.to?.map(mailbox), [{ name: '', address: 'alice@receiver.test' }, { name: 'Bob "the" Builder', address: 'bob@receiver.test' }]);
  assert.equal(email.cc?.map(mailbox), [{ name: 'Çarla', address: 'carla@other.test' }]);
  assert.equal(email.replyTo?.map(mailbox), [{ name: 'Support', address: 'support@acme.example' }]);
  assert.is(email.subject, sent.subject);
  assert.is(email.messageId, `<${EMAIL_ID}@${DOMAIN}>`);
  assert.is(new Date(email.date ?? '').toISOString(), '2025-03-01T12:34:56.000Z');
  assert.equal(header(email, 'x-entity-ref-id'), ['order-1234']);
  assert.equal(header(email, 'list-unsubscribe'), ['<https://acme.example/u/1>']);
  assert.equal(header(email, 'mime-version'), ['1.0']);
  assert.match(header(email, 'x-unicode')[0] ?? '', /^=\?utf-8\?/i, 'non-ASCII custom header values are RFC 2047 encoded');
  assert.equal(header(email, 'bcc'), []);
  assert.is(email.bcc, undefined);
  assert.match(header(email, 'content-type')[0] ?? '', /^multipart\/alternative;/);
  assert.is(lf(email.text).trimEnd(), sent.text);
  assert.ok(lf(email.text).includes(`\n${LONG_LINE}\n`), 'the 2,000-character line survives intact');
  assert.is(lf(email.html).trim(), sent.html);
});

compose('given a non-ASCII subject and display name, then the raw headers are 7-bit RFC 2047 encoded words', async (ctx) => {
  const { raw } = await composeMessage(input(ctx));
  const headerBlock = raw.toString('latin1').split('\r\n\r\n')[0];
  assert.not.match(headerBlock, /[^\x00-\x7f]/, 'headers are ASCII only');
  assert.match(headerBlock, /^From: =\?UTF-8\?[QB]\?/m);
  assert.match(headerBlock, /^Subject: =\?UTF-8\?[QB]\?/m);
});

compose('given any message, then lines end in CRLF and none is longer than 998 characters', async (ctx) => {
  const { raw } = await composeMessage(input(ctx, { html: `<p>${'x'.repeat(5000)}</p>` }));
  const text = raw.toString('latin1');
  assert.not.match(text, /[^\r]\n/, 'no bare LF');
  assert.not.match(text, /\r[^\n]/, 'no bare CR');
  assert.ok(text.endsWith('\r\n'));
  for (const line of text.split('\r\n')) assert.ok(line.length <= 998, `line of ${line.length} chars`);
});

compose('given a signed message, when a second From (or any other over-signed field) is added, then mailauth says fail', async (ctx) => {
  const { raw } = await composeMessage(input(ctx, { replyTo: null }));
  const text = raw.toString('latin1');
  const signature = /^DKIM-Signature:((?:.*\r\n[ \t].*)*.*)\r\n/.exec(text)?.[1].replace(/\s+/g, '') ?? '';
  const listed = (/(?:^|;)h=([^;]+)/.exec(signature)?.[1] ?? '').toLowerCase().split(':');
  assert.is(listed.filter((n) => n === 'from').length, 2, `h= names From twice: ${listed.join(':')}`);
  assert.is(listed.filter((n) => n === 'reply-to').length, 1, 'an absent Reply-To is listed once');
  const [untouched] = await verifyDkim(ctx, raw);
  assert.is(untouched.status.result, 'pass', untouched.info);
  // Right under the signature (what many clients would show) and at the end of the header.
  const afterSignature = text.replace(/(\r\n)(?=[^ \t])/, '$1From: Bank <security@bank.test>\r\n');
  const atEnd = text.replace('\r\n\r\n', '\r\nFrom: Bank <security@bank.test>\r\n\r\n');
  const addedReplyTo = text.replace('\r\n\r\n', '\r\nReply-To: attacker@evil.test\r\n\r\n');
  const addedSubject = text.replace('\r\n\r\n', '\r\nSubject: Urgent: verify your account\r\n\r\n');
  for (const [what, tampered] of [['From after the signature', afterSignature], ['From at the end', atEnd], ['Reply-To', addedReplyTo], ['Subject', addedSubject]]) {
    assert.is.not(tampered, text, what);
    const [verdict] = await verifyDkim(ctx, Buffer.from(tampered, 'latin1'));
    assert.is(verdict.status.result, 'fail', `${what}: ${verdict.info}`);
  }
  // A field outside the over-signed set may still be added, as relays do.
  const [relayed] = await verifyDkim(ctx, Buffer.from(text.replace('\r\n\r\n', '\r\nX-Relayed-By: mx.test\r\n\r\n'), 'latin1'));
  assert.is(relayed.status.result, 'pass', relayed.info);
});

compose('given many signed fields (50 case variants of List-Unsubscribe-Post, as admitted before names were unique case-insensitively), then h= folds at its colons: no DKIM-Signature line over 78 characters, and it verifies', async (ctx) => {
  const name = 'list-unsubscribe-post';
  const headers: Record<string, string> = {};
  for (let m = 0; Object.keys(headers).length < 50; m++) headers[[...name].map((c, i) => ((m >> i) & 1 ? c.toUpperCase() : c)).join('')] = 'List-Unsubscribe=One-Click';
  const { raw } = await composeMessage(input(ctx, { headers }));
  const text = raw.toString('latin1');
  const signature = /^DKIM-Signature:(?:.*\r\n[ \t].*)*.*\r\n/.exec(text)?.[0] ?? '';
  const lines = signature.split('\r\n').slice(0, -1);
  assert.ok(lines.length > 10, signature);
  for (const line of lines) assert.ok(line.length <= 78, `a DKIM-Signature line of ${line.length} characters: ${line}`);
  const listed = (/(?:^|;)h=([^;]+)/.exec(signature.replace(/\s+/g, ''))?.[1] ?? '').split(':');
  assert.is(listed.filter((n) => n === name).length, 50, listed.join(':'));
  const [verdict] = await verifyDkim(ctx, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
});

compose('given bodies with trailing spaces, tabs and empty lines at the end, then the relaxed body hash still verifies', async (ctx) => {
  for (const text of ['a  \t b \t\n\n\n', ' lead\n\ttab\n \n', 'x']) {
    const { raw } = await composeMessage(input(ctx, { html: null, text }));
    const [dkim] = await verifyDkim(ctx, raw);
    assert.is(dkim.status.result, 'pass', `${JSON.stringify(text)}: ${dkim.info}`);
  }
});

compose('given only a text body, no Cc and no Reply-To, then it is a single text/plain part without those headers', async (ctx) => {
  const { raw } = await composeMessage(input(ctx, { html: null, cc: [], replyTo: null }));
  const email = await PostalMime.parse(raw);
  assert.match(header(email, 'content-type')[0] ?? '', /^text\/plain; charset=utf-8/);
  assert.equal(header(email, 'cc'), []);
  assert.equal(header(email, 'reply-to'), []);
  assert.is(lf(email.text).trimEnd(), input(ctx).text);
  assert.is(email.html, undefined);
  const [dkim] = await verifyDkim(ctx, raw);
  assert.is(dkim.status.result, 'pass', dkim.info);
});

compose('given only an HTML body, then it is a single text/html part that verifies', async (ctx) => {
  const { raw } = await composeMessage(input(ctx, { text: null }));
  const email = await PostalMime.parse(raw);
  assert.match(header(email, 'content-type')[0] ?? '', /^text\/html; charset=utf-8/);
  assert.is(lf(email.html).trim(), input(ctx).html);
  const [dkim] = await verifyDkim(ctx, raw);
  assert.is(dkim.status.result, 'pass', dkim.info);
});

compose('given customer headers naming Message-ID or Date, then the composer\'s own values stand, once', async (ctx) => {
  const { raw } = await composeMessage(input(ctx, { headers: { 'Message-ID': '<forged@evil.test>', Date: 'Thu, 01 Jan 1970 00:00:00 +0000', 'X-Kept': 'yes' } }));
  const email = await PostalMime.parse(raw);
  assert.equal(header(email, 'message-id'), [`<${EMAIL_ID}@${DOMAIN}>`]);
  assert.is(header(email, 'date').length, 1);
  assert.is(new Date(email.date ?? '').toISOString(), '2025-03-01T12:34:56.000Z');
  assert.equal(header(email, 'x-kept'), ['yes']);
});

compose('given one email composed twice (a retry), then the Message-ID is the same', async (ctx) => {
  const first = await composeMessage(input(ctx));
  const second = await composeMessage(input(ctx, { messageId: newMessageId(EMAIL_ID, 'ACME.example') }));
  assert.is(second.messageId, first.messageId);
  assert.ok(second.raw.includes(`Message-ID: <${first.messageId}>`));
});

compose('given a key rotated under the same selector, then each message is signed with the key it was given, not one parsed before', async (ctx) => {
  const rotated = { ...(await generateDkimKeyPair()), selector: ctx.key.selector };
  const withKey = (key: DkimKeyPair) => input(ctx, { dkim: { domainName: DOMAIN, keySelector: key.selector, privateKey: key.privateKeyPem } });
  try {
    // The old key signs first (and again), so that a cache keyed by domain and selector would hold it.
    const before = await composeMessage(withKey(ctx.key));
    await composeMessage(withKey(ctx.key));
    ctx.server.setZone(dkimZone(rotated));
    const after = await composeMessage(withKey(rotated));
    assert.is((await verifyDkim(ctx, after.raw))[0].status.result, 'pass', 'signed with the rotated key');
    assert.is((await verifyDkim(ctx, before.raw))[0].status.result, 'fail', 'the old key no longer verifies: DNS serves the rotated one');
    assert.is((await verifyDkim(ctx, (await composeMessage(withKey(ctx.key))).raw))[0].status.result, 'fail', 'a message given the old key is signed with it');
  } finally {
    ctx.server.setZone(dkimZone(ctx.key));
  }
});

compose('given a private key that cannot sign, then composing fails instead of sending unsigned', async (ctx) => {
  try {
    await composeMessage(input(ctx, { dkim: { domainName: DOMAIN, keySelector: ctx.key.selector, privateKey: '-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n' } }));
    assert.unreachable('composed without a signature');
  } catch (error) {
    assert.match((error as Error).message, /DKIM signing failed/);
  }
});

compose('newMessageId is the email id at the normalized sending domain', () => {
  assert.is(newMessageId(EMAIL_ID, ' Acme.Example. '), `${EMAIL_ID}@acme.example`);
  assert.throws(() => newMessageId('em_<bad>', DOMAIN), /not an email id/);
});

compose.run();
