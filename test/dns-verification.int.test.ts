// Sending-domain verification through the real node:dns resolver against a real
// authoritative DNS server on loopback (test/support/dns-server.ts).
import { createPublicKey, sign, verify as verifySignature } from 'node:crypto';
import dgram from 'node:dgram';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { requiredRecords, splitTxtValue } from '../domain/sending-domain.ts';
import type { RecordPurpose, SendingDomainSettings, VerificationResult } from '../domain/sending-domain.ts';
import { generateDkimKeyPair } from '../infra/dns/dkim-keys.ts';
import type { DkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { createDnsLookup } from '../infra/dns/resolver.ts';
import { verifySendingDomain } from '../infra/dns/verify-domain.ts';
import { startDnsServer } from './support/dns-server.ts';
import type { TestDnsServer, ZoneRecord } from './support/dns-server.ts';

const DOMAIN = 'example.test';
const MAIL_FROM = `bounce.${DOMAIN}`;
const MX_HOST = 'feedback.relay.test';
const SPF_INCLUDE = 'spf.relay.test';

interface Context {
  server: TestDnsServer;
  key: DkimKeyPair;
  otherKey: DkimKeyPair;
  settings: SendingDomainSettings;
  dkimName: string;
}

/** Hang guard: lets a stuck lookup fail the test instead of stalling the run. Not a speed check. */
async function settlesWithin<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, guard]);
  } finally {
    clearTimeout(timer);
  }
}

/** The zone a customer who followed the instructions would publish. */
function correctZone(ctx: Context): ZoneRecord[] {
  return [
    { name: DOMAIN, type: 'A', data: '192.0.2.10' },
    { name: ctx.dkimName, type: 'TXT', data: splitTxtValue(`v=DKIM1; k=rsa; p=${ctx.key.publicKeyBase64}`) },
    { name: MAIL_FROM, type: 'MX', data: { preference: 10, exchange: MX_HOST } },
    { name: MAIL_FROM, type: 'TXT', data: `v=spf1 include:${SPF_INCLUDE} ~all` },
    { name: `_dmarc.${DOMAIN}`, type: 'TXT', data: 'v=DMARC1; p=none;' },
  ];
}

function statusOf(result: VerificationResult, purpose: RecordPurpose) {
  const check = result.checks.find((c) => c.purpose === purpose);
  if (!check) throw new Error(`no ${purpose} check`);
  return check;
}

const dnsVerification = suite<Context>('sending-domain verification over DNS');

dnsVerification.before(async (ctx) => {
  [ctx.key, ctx.otherKey] = await Promise.all([generateDkimKeyPair(), generateDkimKeyPair()]);
  ctx.settings = {
    domain: DOMAIN,
    dkimSelector: ctx.key.selector,
    dkimPublicKeyBase64: ctx.key.publicKeyBase64,
    mailFromSubdomain: 'bounce',
    mxHost: MX_HOST,
    spfInclude: SPF_INCLUDE,
  };
  ctx.dkimName = `${ctx.key.selector}._domainkey.${DOMAIN}`;
  ctx.server = await startDnsServer([]);
});

dnsVerification.before.each((ctx) => {
  ctx.server.setZone(correctZone(ctx));
});

dnsVerification.after(async (ctx) => {
  await ctx.server.close();
});

function lookupFor(ctx: Context) {
  return createDnsLookup([ctx.server.address], { timeoutMs: 1000, tries: 2 });
}

dnsVerification('given the records published as instructed, when verified, then the domain is verified', async (ctx) => {
  const result = await verifySendingDomain(ctx.settings, lookupFor(ctx));
  assert.equal(result.checks.map((c) => [c.purpose, c.name, c.status]), [
    ['dkim', ctx.dkimName, 'ok'],
    ['mail_from_mx', MAIL_FROM, 'ok'],
    ['mail_from_spf', MAIL_FROM, 'ok'],
    ['dmarc', `_dmarc.${DOMAIN}`, 'ok'],
  ]);
  assert.is(result.verified, true);
  assert.equal(statusOf(result, 'dkim').found, [requiredRecords(ctx.settings)[0].value]);
});

type Breakage = {
  what: string;
  purpose: RecordPurpose;
  status: 'missing' | 'mismatch';
  change: (zone: ZoneRecord[], ctx: Context) => ZoneRecord[];
};

const isDkim = (r: ZoneRecord, ctx: Context) => r.name === ctx.dkimName;
const isSpf = (r: ZoneRecord) => r.name === MAIL_FROM && r.type === 'TXT';
const isMx = (r: ZoneRecord) => r.name === MAIL_FROM && r.type === 'MX';

const BREAKAGES: Breakage[] = [
  { what: 'DKIM record missing', purpose: 'dkim', status: 'missing', change: (z, ctx) => z.filter((r) => !isDkim(r, ctx)) },
  {
    what: 'DKIM record with another key',
    purpose: 'dkim',
    status: 'mismatch',
    change: (z, ctx) => z.map((r) => (isDkim(r, ctx) ? { name: r.name, type: 'TXT', data: `v=DKIM1; k=rsa; p=${ctx.otherKey.publicKeyBase64}` } : r)),
  },
  { what: 'MX missing', purpose: 'mail_from_mx', status: 'missing', change: (z) => z.filter((r) => !isMx(r)) },
  {
    what: 'MX to another host',
    purpose: 'mail_from_mx',
    status: 'mismatch',
    change: (z) => z.map((r) => (isMx(r) ? { name: MAIL_FROM, type: 'MX', data: { preference: 10, exchange: 'mx.elsewhere.test' } } : r)),
  },
  { what: 'SPF missing', purpose: 'mail_from_spf', status: 'missing', change: (z) => z.filter((r) => !isSpf(r)) },
  {
    what: 'SPF without the include',
    purpose: 'mail_from_spf',
    status: 'mismatch',
    change: (z) => z.map((r) => (isSpf(r) ? { name: MAIL_FROM, type: 'TXT', data: 'v=spf1 include:_spf.other.test ~all' } : r)),
  },
  {
    what: 'two SPF records',
    purpose: 'mail_from_spf',
    status: 'mismatch',
    change: (z) => [...z, { name: MAIL_FROM, type: 'TXT', data: 'v=spf1 a -all' }],
  },
];

for (const breakage of BREAKAGES) {
  dnsVerification(`given ${breakage.what}, when verified, then that record is reported ${breakage.status} by name and the domain is not verified`, async (ctx) => {
    ctx.server.setZone(breakage.change(correctZone(ctx), ctx));
    const result = await verifySendingDomain(ctx.settings, lookupFor(ctx));
    assert.is(result.verified, false);
    const broken = statusOf(result, breakage.purpose);
    assert.is(broken.status, breakage.status);
    assert.match(broken.message, broken.name);
    const others = result.checks.filter((c) => c.purpose !== breakage.purpose).map((c) => [c.purpose, c.status]);
    assert.equal(others, (['dkim', 'mail_from_mx', 'mail_from_spf', 'dmarc'] as const).filter((p) => p !== breakage.purpose).map((p) => [p, 'ok']));
  });
}

dnsVerification('given two SPF records, when verified, then both are listed as found', async (ctx) => {
  ctx.server.setZone([...correctZone(ctx), { name: MAIL_FROM, type: 'TXT', data: 'v=spf1 a -all' }]);
  const spf = statusOf(await verifySendingDomain(ctx.settings, lookupFor(ctx)), 'mail_from_spf');
  assert.equal([...spf.found].sort(), [`v=spf1 include:${SPF_INCLUDE} ~all`, 'v=spf1 a -all'].sort());
});

dnsVerification('given no DMARC record, when verified, then DMARC is reported missing and the domain is still verified', async (ctx) => {
  ctx.server.setZone(correctZone(ctx).filter((r) => !r.name.startsWith('_dmarc.')));
  const result = await verifySendingDomain(ctx.settings, lookupFor(ctx));
  assert.is(statusOf(result, 'dmarc').status, 'missing');
  assert.is(result.verified, true);
});

dnsVerification('given a 4096-bit DKIM key published as 255-char strings, when verified, then the strings are joined and it verifies', async (ctx) => {
  const big = await generateDkimKeyPair({ modulusLength: 4096 });
  const value = `v=DKIM1; k=rsa; p=${big.publicKeyBase64}`;
  const chunks = splitTxtValue(value);
  assert.ok(chunks.length >= 3, 'the record spans several character-strings');
  const name = `${big.selector}._domainkey.${DOMAIN}`;
  ctx.server.setZone([...correctZone(ctx), { name, type: 'TXT', data: chunks }]);
  const settings = { ...ctx.settings, dkimSelector: big.selector, dkimPublicKeyBase64: big.publicKeyBase64 };
  const result = await verifySendingDomain(settings, lookupFor(ctx));
  assert.is(statusOf(result, 'dkim').status, 'ok');
  assert.equal(statusOf(result, 'dkim').found, [value]);
  assert.is(result.verified, true);
});

dnsVerification.run();

// ---------------------------------------------------------------------------------------
const unreachable = suite('sending-domain verification when DNS is unreachable');

const SETTINGS: SendingDomainSettings = {
  domain: DOMAIN,
  dkimSelector: 'rr1',
  dkimPublicKeyBase64: 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA',
  mailFromSubdomain: 'bounce',
  mxHost: MX_HOST,
};

async function freeUdpPort(): Promise<number> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

unreachable('given a server address where nothing listens, when verified, then every check is error and nothing throws', async () => {
  const port = await freeUdpPort();
  const lookup = createDnsLookup([`127.0.0.1:${port}`], { timeoutMs: 200, tries: 1 });
  const result = await settlesWithin(10_000, verifySendingDomain(SETTINGS, lookup));
  assert.is(result.verified, false);
  assert.equal(result.checks.map((c) => c.status), ['error', 'error', 'error', 'error']);
  for (const check of result.checks) assert.match(check.message, check.name);
});

unreachable('given a server that never answers, when verified, then checks time out as error', async () => {
  const silent = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', resolve));
  try {
    const lookup = createDnsLookup([`127.0.0.1:${silent.address().port}`], { timeoutMs: 200, tries: 1 });
    const result = await settlesWithin(10_000, verifySendingDomain(SETTINGS, lookup));
    assert.is(result.verified, false);
    assert.equal(result.checks.map((c) => c.status), ['error', 'error', 'error', 'error']);
    assert.match(result.checks[0].message, /ETIMEOUT/);
  } finally {
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});

unreachable('given server addresses in each accepted form, when creating a lookup, then only malformed ones are refused', () => {
  createDnsLookup(['127.0.0.1', '127.0.0.1:5353', '::1', '[::1]:5353']);
  createDnsLookup([]);
  assert.throws(() => createDnsLookup(['dns.example.test']), /Invalid DNS server list/);
});

unreachable.run();

// ---------------------------------------------------------------------------------------
const keys = suite('DKIM key pair');

keys('given a generated key pair, when the p= value is decoded, then it is the public half of the private key', async () => {
  const pair = await generateDkimKeyPair({ now: new Date('2025-03-01T12:00:00Z') });
  assert.match(pair.selector, /^rr20250301[a-z2-7]{6}$/);
  assert.match(pair.privateKeyPem, /^-----BEGIN PRIVATE KEY-----/);
  const publicKey = createPublicKey({ key: Buffer.from(pair.publicKeyBase64, 'base64'), format: 'der', type: 'spki' });
  assert.is(publicKey.asymmetricKeyType, 'rsa');
  assert.is(publicKey.asymmetricKeyDetails?.modulusLength, 2048);
  const data = Buffer.from('dkim-signature header hash');
  assert.ok(verifySignature('sha256', data, publicKey, sign('sha256', data, pair.privateKeyPem)));
  const again = await generateDkimKeyPair({ now: new Date('2025-03-01T12:00:00Z') });
  assert.is.not(again.selector, pair.selector);
  assert.is.not(again.publicKeyBase64, pair.publicKeyBase64);
});

keys('given a key shorter than RFC 8301 allows, when generating, then it is refused', async () => {
  try {
    await generateDkimKeyPair({ modulusLength: 512 });
  } catch (error) {
    assert.instance(error, RangeError);
    return;
  }
  assert.unreachable('512-bit key was generated');
});

keys.run();
