// Under DANE-TA(2) a leaf certificate that names its MX host only by its subject Common Name (no
// subjectAltName DNS entry at all) names that host: RFC 7672 3.2.3, "if the server certificate
// contains a Subject Alternative Name extension, with at least one DNS-ID, then only the DNS-IDs
// are matched against the client's reference identifiers. The CN-ID is only considered when no
// DNS-IDs are present." DANE-TA anchors are often the domain's own CA, whose leaves may be made
// the old way, CN only; refused, the domain's mail would be deferred for good although its chain
// leads to the anchor it published in DNSSEC. (MTA-STS differs: RFC 8461 4.2 asks for a DNS-ID,
// test/mta-sts-certificate-names.int.test.ts.) A leaf with DNS-IDs is matched by them alone, and
// a CN naming another host names nothing (infra/mail/certificate-dns-ids.ts, x509NamesHost).
import { createHash, X509Certificate } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { issueNamed } from './support/certificate-names.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { ca: TestCa; dns: TestDnsServer; sink: SmtpSink; sessions: TlsSessionResult[]; transport?: MxTransport }

const test = suite<Context>('DANE-TA: a leaf that names its host by its Common Name alone');

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();
const message = (to: string): OutgoingMessage => ({
  emailId: 'em_dane_cn', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('From: a@example.test\r\nSubject: dane\r\n\r\nhi\r\n'), messageId: 'dane-cn@example.test',
});

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  // The domain's own CA issued the leaf the old way: CN = the MX host, no subjectAltName.
  const leaf = issueNamed(ctx.ca, { cn: 'mx.ta-cn.test' });
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(leaf.key), cert: Buffer.from(leaf.cert + ctx.ca.ca) } });
  const anchor = sha256(new X509Certificate(ctx.ca.ca).raw);
  const zone: ZoneRecord[] = [
    { name: 'ta-cn.test', type: 'MX', data: { preference: 10, exchange: 'mx.ta-cn.test' } },
    { name: 'mx.ta-cn.test', type: 'A', data: '127.0.0.1' },
    // DANE-TA(2), full certificate, SHA-256: the CA in the server's chain.
    { name: `_${ctx.sink.port}._tcp.mx.ta-cn.test`, type: 'TLSA', data: { usage: 2, selector: 0, matchingType: 1, certificate: anchor } },
  ];
  ctx.dns = await startDnsServer([]);
  ctx.dns.setZone(zone);
  ctx.dns.authenticated = () => true;
  ctx.sessions = [];
});

test.after(async (ctx) => {
  await ctx.transport?.close();
  await ctx.sink.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

test('the chain leads to the TLSA trust anchor and the leaf, without DNS-IDs, names the MX host by its CN: delivered', async (ctx) => {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1, dnssec: true }));
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses: new Set(['127.0.0.1']),
    tlsReports: { record: (session) => ctx.sessions.push(session) },
  });
  const [recipient] = (await ctx.transport.send(message('ann@ta-cn.test'))).recipients;
  const sessions = ctx.sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.result, s.detail ?? null]);
  assert.ok(sessions.some(([type]) => type === 'tlsa'), `DANE applied (the TLSA record is authenticated): ${JSON.stringify(sessions)}`);
  assert.is(recipient.result, 'delivered', `RFC 7672 3.2.3: the CN-ID counts when no DNS-ID is present; got ${recipient.result}: ${recipient.response}`);
  assert.is(ctx.sink.messages.length, 1);
  assert.equal(sessions, [['tlsa', 'mx.ta-cn.test', 'success', null]]);
});

test.run();
