// A send with `ignoreTlsPolicy` (the TLS report mail, RFC 8460 5.3.1: "Sending MTAs MUST NOT
// honor MTA-STS or DANE TLSA failures") goes through whatever the recipient domain's MTA-STS
// policy or TLSA records would refuse, over opportunistic TLS, and each session it makes is
// still counted once for TLS reports, judged against the policy that was not honored. An
// ordinary send to the same domain right after is still refused: the connection the ignoring
// send left in the pool is not one an enforced policy may reuse.
//
// Through real interfaces: the mx transport and MTA-STS resolver, the test DNS server (playing
// the validating resolver for DANE: AD bit on every answer), a real HTTPS policy host and a real
// SMTP server whose self-signed certificate names none of the MX hosts.
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

interface Context { ca: TestCa; dns: TestDnsServer; sink: SmtpSink; policies: PolicyServer; sessions: TlsSessionResult[]; transport?: MxTransport }

const mx = (domain: string, exchange: string): ZoneRecord => ({ name: domain, type: 'MX', data: { preference: 10, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });
const message = (to: string): OutgoingMessage => ({
  emailId: 'tlsrpt-2031-04-01', envelope: { mailFrom: 'tlsrpt@relay-ops.test', recipients: [to] }, raw: Buffer.from('From: tlsrpt@relay-ops.test\r\nSubject: report\r\n\r\nreport\r\n'), messageId: 'report@relay-ops.test',
});

const test = suite<Context>('mx transport: a send that does not honor the TLS policy');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const self = makeTestCert(['self.example']);
  ctx.sink = await startSmtpSink({ cert: self });
  const port = ctx.sink.port;
  const spki = createHash('sha256').update(new X509Certificate(self.cert).publicKey.export({ type: 'spki', format: 'der' })).digest();
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.sts.test']));
  ctx.policies.policies.set('sts.test', policyText('enforce', ['mx.listed.test']));
  ctx.dns = await startDnsServer([
    // MTA-STS enforce: the only MX is not in the policy (and its certificate names nothing of it).
    mx('sts.test', 'mx.sts.test'), loopback('mx.sts.test'), { name: '_mta-sts.sts.test', type: 'TXT', data: 'v=STSv1; id=s1' }, loopback('mta-sts.sts.test'),
    // DANE: a TLSA record the certificate does not match.
    mx('dane.test', 'mx.dane.test'), loopback('mx.dane.test'),
    { name: `_${port}._tcp.mx.dane.test`, type: 'TLSA', data: { usage: 3, selector: 1, matchingType: 1, certificate: createHash('sha256').update('another key').digest() } },
    // DANE: a signed zone whose TLSA lookup fails.
    mx('broken.test', 'mx.broken.test'), loopback('mx.broken.test'), { name: `_${port}._tcp.mx.broken.test`, type: 'SERVFAIL' },
    // Control: the right key.
    mx('good.test', 'mx.good.test'), loopback('mx.good.test'),
    { name: `_${port}._tcp.mx.good.test`, type: 'TLSA', data: { usage: 3, selector: 1, matchingType: 1, certificate: spki } },
  ]);
  ctx.dns.authenticated = () => true;
});

test.before.each((ctx) => {
  ctx.sessions = [];
  ctx.sink.messages.length = 0;
  ctx.sink.mailFromCommands.length = 0;
});

test.after.each(async (ctx) => {
  await ctx.transport?.close();
  ctx.transport = undefined;
});

test.after(async (ctx) => {
  await ctx.sink.close();
  await ctx.policies.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

function transport(ctx: Context): MxTransport {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1, dnssec: true }));
  const allowAddresses = new Set(['127.0.0.1']);
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000 }),
    tlsReports: { record: (session) => ctx.sessions.push(session) },
  });
  return ctx.transport;
}

const counted = (ctx: Context) => ctx.sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.receivingIp ?? null, s.result]);

test('MTA-STS enforce: the MX the policy does not list gets the mail; its one session is counted as that failure; an ordinary send is still refused', async (ctx) => {
  const t = transport(ctx);
  const ignoring = await t.send(message('tlsrpt@sts.test'), { ignoreTlsPolicy: true });
  assert.equal(ignoring.recipients.map((r) => r.result), ['delivered'], ignoring.recipients[0].response);
  assert.is(ctx.sink.messages.length, 1);
  assert.ok(ctx.sink.messages[0].secure, 'STARTTLS all the same, unverified');
  assert.equal(counted(ctx), [['sts', 'mx.sts.test', '127.0.0.1', 'validation-failure']]);
  assert.ok(ctx.sessions[0].policy.strings.includes('mode: enforce'), 'judged against the policy it did not honor');

  ctx.sessions = [];
  const ordinary = (await t.send(message('ann@sts.test'))).recipients[0];
  assert.equal([ordinary.result, ordinary.stage], ['deferred', 'tls']);
  assert.match(ordinary.response, /MTA-STS \(enforce\) of sts\.test: MX host mx\.sts\.test does not match/);
  assert.is(ctx.sink.messages.length, 1, 'nothing more delivered');
});

test('DANE: a TLSA mismatch, and a TLSA lookup that fails, do not hold the mail; each session is counted once under tlsa', async (ctx) => {
  const t = transport(ctx);
  const mismatch = (await t.send(message('tlsrpt@dane.test'), { ignoreTlsPolicy: true })).recipients[0];
  assert.is(mismatch.result, 'delivered', mismatch.response);
  const broken = (await t.send(message('tlsrpt@broken.test'), { ignoreTlsPolicy: true })).recipients[0];
  assert.is(broken.result, 'delivered', broken.response);
  assert.equal(counted(ctx), [['tlsa', 'mx.dane.test', '127.0.0.1', 'validation-failure'], ['tlsa', 'mx.broken.test', '127.0.0.1', 'dnssec-invalid']]);

  ctx.sessions = [];
  const ordinary = (await t.send(message('ann@dane.test'))).recipients[0];
  assert.equal([ordinary.result, ordinary.stage], ['deferred', 'tls'], 'the opportunistic connection left in the pool is not reused under DANE');
  assert.match(ordinary.response, /DANE \(TLSA /);
  assert.equal(counted(ctx), [['tlsa', 'mx.dane.test', '127.0.0.1', 'validation-failure']]);
});

test('a policy that is met is counted as a success, ignored or not', async (ctx) => {
  const t = transport(ctx);
  const recipient = (await t.send(message('tlsrpt@good.test'), { ignoreTlsPolicy: true })).recipients[0];
  assert.is(recipient.result, 'delivered', recipient.response);
  assert.equal(counted(ctx), [['tlsa', 'mx.good.test', '127.0.0.1', 'success']]);
});

test.run();
