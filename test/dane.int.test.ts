// DANE (RFC 7672) in the mx transport: the test DNS server plays the validating resolver
// RELAY_DNSSEC_RESOLVER names (AD bit on the answers it calls secure, to queries with the DO
// bit), serves TLSA records for the MX hosts, and mail goes to real SMTP servers whose
// certificates match those records or not.
import { createHash, X509Certificate } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { makeTestCert, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  /** Presents a self-signed certificate no CA vouches for, naming none of the MX hosts. */
  selfSigned: SmtpSink;
  selfSignedSpki: Buffer;
  /** Presents a leaf for ta-good.test's MX issued by the test CA, with the CA in its chain. */
  chained: SmtpSink;
  caDigest: Buffer;
  policies: PolicyServer;
  sessions: TlsSessionResult[];
  transport?: MxTransport;
}

const mx = (domain: string, exchange: string): ZoneRecord => ({ name: domain, type: 'MX', data: { preference: 10, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });
const tlsa = (port: number, host: string, usage: number, selector: number, matchingType: number, certificate: Buffer): ZoneRecord =>
  ({ name: `_${port}._tcp.${host}`, type: 'TLSA', data: { usage, selector, matchingType, certificate } });
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();
const message = (to: string): OutgoingMessage => ({
  emailId: 'em_dane', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('From: a@example.test\r\nSubject: dane\r\n\r\nhi\r\n'), messageId: 'dane@example.test',
});

const test = suite<Context>('DANE');

function zone(ctx: Context): ZoneRecord[] {
  const ee = ctx.selfSigned.port;
  const ta = ctx.chained.port;
  return [
    mx('ee.test', 'mx.ee.test'), loopback('mx.ee.test'), tlsa(ee, 'mx.ee.test', 3, 1, 1, ctx.selfSignedSpki),
    mx('wrong.test', 'mx.wrong.test'), loopback('mx.wrong.test'), tlsa(ee, 'mx.wrong.test', 3, 1, 1, sha256(Buffer.from('another key'))),
    // An MTA-STS policy that lists another MX: DANE, which matches, decides.
    mx('both.test', 'mx.both.test'), loopback('mx.both.test'), tlsa(ee, 'mx.both.test', 3, 1, 1, ctx.selfSignedSpki),
    { name: '_mta-sts.both.test', type: 'TXT', data: 'v=STSv1; id=1' }, loopback('mta-sts.both.test'),
    // DANE-TA: the CA in the chain matches; the leaf names mx.ta-good.test only.
    mx('ta-good.test', 'mx.ta-good.test'), loopback('mx.ta-good.test'), tlsa(ta, 'mx.ta-good.test', 2, 0, 1, ctx.caDigest),
    mx('ta-name.test', 'mx.ta-name.test'), loopback('mx.ta-name.test'), tlsa(ta, 'mx.ta-name.test', 2, 0, 1, ctx.caDigest),
    // A signed zone whose TLSA lookup fails.
    mx('broken.test', 'mx.broken.test'), loopback('mx.broken.test'), { name: `_${ee}._tcp.mx.broken.test`, type: 'SERVFAIL' },
    // Its preferred host's TLSA lookup fails; the next one has no TLSA record (opportunistic TLS).
    { name: 'halfbroken.test', type: 'MX', data: { preference: 5, exchange: 'mx.broken.test' } }, mx('halfbroken.test', 'mx2.halfbroken.test'), loopback('mx2.halfbroken.test'),
  ];
}

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const self = makeTestCert(['self.example']);
  ctx.selfSigned = await startSmtpSink({ cert: self });
  ctx.selfSignedSpki = sha256(new X509Certificate(self.cert).publicKey.export({ type: 'spki', format: 'der' }));
  const leaf = ctx.ca.issue(['mx.ta-good.test']);
  ctx.chained = await startSmtpSink({ cert: { key: Buffer.from(leaf.key), cert: Buffer.from(leaf.cert + ctx.ca.ca) } });
  ctx.caDigest = sha256(new X509Certificate(ctx.ca.ca).raw);
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.both.test']));
  ctx.policies.policies.set('both.test', policyText('enforce', ['mx.elsewhere.test']));
  ctx.dns = await startDnsServer([]);
  ctx.dns.setZone(zone(ctx));
});

test.before.each((ctx) => {
  ctx.sessions = [];
  ctx.dns.authenticated = () => true;
  ctx.dns.queries.length = 0;
  ctx.selfSigned.messages.length = 0;
  ctx.selfSigned.mailFromCommands.length = 0;
  ctx.chained.messages.length = 0;
});

test.after.each(async (ctx) => {
  await ctx.transport?.close();
  ctx.transport = undefined;
});

test.after(async (ctx) => {
  await ctx.selfSigned.close();
  await ctx.chained.close();
  await ctx.policies.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

function transport(ctx: Context, sink: SmtpSink, dnssec = true): MxTransport {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1, dnssec }));
  const allowAddresses = new Set(['127.0.0.1']);
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses }),
    tlsReports: { record: (session) => ctx.sessions.push(session) },
  });
  return ctx.transport;
}

const outcomeOf = async (t: MxTransport, to: string) => (await t.send(message(to))).recipients[0];
const results = (ctx: Context) => ctx.sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.result]);

test('DANE-EE: a certificate no CA vouches for and naming another host is accepted because its key matches the TLSA record', async (ctx) => {
  const recipient = await outcomeOf(transport(ctx, ctx.selfSigned), 'ann@ee.test');
  assert.is(recipient.result, 'delivered', recipient.response);
  assert.ok(ctx.selfSigned.messages[0].secure);
  assert.equal(results(ctx), [['tlsa', 'mx.ee.test', 'success']]);
  assert.equal(ctx.sessions[0].policy.strings, [`3 1 1 ${ctx.selfSignedSpki.toString('hex')}`]);
  assert.ok(ctx.dns.dnssecOk.every(Boolean), 'every query asked for DNSSEC');
});

test('a TLSA record the certificate does not match: deferred, naming DANE, no envelope sent', async (ctx) => {
  const recipient = await outcomeOf(transport(ctx, ctx.selfSigned), 'ann@wrong.test');
  assert.equal([recipient.result, recipient.stage], ['deferred', 'tls']);
  assert.match(recipient.response, new RegExp(`mx\\.wrong\\.test \\[127\\.0\\.0\\.1\\]: DANE \\(TLSA _${ctx.selfSigned.port}\\._tcp\\.mx\\.wrong\\.test\\): no TLSA record matches`));
  assert.equal(ctx.selfSigned.mailFromCommands, []);
  assert.equal(results(ctx), [['tlsa', 'mx.wrong.test', 'validation-failure']]);
});

test('DANE takes precedence over MTA-STS: an MX outside the enforce policy is used because its TLSA matches', async (ctx) => {
  const recipient = await outcomeOf(transport(ctx, ctx.selfSigned), 'ann@both.test');
  assert.is(recipient.result, 'delivered', recipient.response);
  assert.equal(results(ctx), [['tlsa', 'mx.both.test', 'success']]);
});

test('DANE-TA: the chain leads to the TLSA trust anchor and the leaf names the host; a leaf naming another host is refused', async (ctx) => {
  const t = transport(ctx, ctx.chained);
  const good = await outcomeOf(t, 'ann@ta-good.test');
  assert.is(good.result, 'delivered', good.response);
  const misnamed = await outcomeOf(t, 'ann@ta-name.test');
  assert.is(misnamed.result, 'deferred');
  assert.match(misnamed.response, /the certificate does not name mx\.ta-name\.test/);
  assert.equal(results(ctx), [['tlsa', 'mx.ta-good.test', 'success'], ['tlsa', 'mx.ta-name.test', 'validation-failure']]);
});

test('answers without the AD bit, or no validating resolver at all: TLSA records are not used (opportunistic TLS)', async (ctx) => {
  ctx.dns.authenticated = () => false;
  const insecure = await outcomeOf(transport(ctx, ctx.selfSigned), 'ann@wrong.test');
  assert.is(insecure.result, 'delivered', insecure.response);
  assert.ok(!ctx.dns.queries.some((q) => q.type === 'TLSA'), 'no TLSA query for an insecure MX');
  await ctx.transport!.close();
  ctx.dns.authenticated = () => true;
  ctx.dns.queries.length = 0;
  const off = await outcomeOf(transport(ctx, ctx.selfSigned, false), 'bob@wrong.test');
  assert.is(off.result, 'delivered', off.response);
  assert.ok(!ctx.dns.queries.some((q) => q.type === 'TLSA'), 'DANE off: no TLSA query');
  assert.equal(results(ctx).map((r) => r[0]), ['no-policy-found', 'no-policy-found']);
});

test('a signed host whose TLSA lookup fails is not used: deferred', async (ctx) => {
  const before = ctx.selfSigned.connections;
  const recipient = await outcomeOf(transport(ctx, ctx.selfSigned), 'ann@broken.test');
  assert.is(recipient.result, 'deferred');
  assert.match(recipient.response, /TLSA lookup for _\d+\._tcp\.mx\.broken\.test failed \(ESERVFAIL\)/);
  assert.is(ctx.selfSigned.connections, before, 'no connection to a host whose TLSA is unknown');
  assert.equal(results(ctx), [['tlsa', 'mx.broken.test', 'dnssec-invalid']]);
});

// TLS reports count sessions (RFC 8460 4.4): the host passed over is the session that would have
// been made, counted with the one made instead, not again for each message that session carries.
test('a host passed over for its failed TLSA lookup is counted once per session, not once per message', async (ctx) => {
  const t = transport(ctx, ctx.selfSigned);
  for (const to of ['ann@halfbroken.test', 'bob@halfbroken.test', 'cy@halfbroken.test']) {
    const recipient = await outcomeOf(t, to);
    assert.is(recipient.result, 'delivered', recipient.response);
  }
  assert.is(ctx.selfSigned.messages.length, 3, 'all three went to the next MX host');
  assert.equal(results(ctx), [['tlsa', 'mx.broken.test', 'dnssec-invalid'], ['no-policy-found', 'mx2.halfbroken.test', 'success']]);
});

test.run();
