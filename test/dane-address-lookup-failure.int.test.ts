// DANE (RFC 7672) when one of an MX host's address lookups fails: the MX answer and the host's
// other address answer are DNSSEC-secure, and a validating resolver answers SERVFAIL to the
// failing one (what it answers for a tampered, bogus, RRset). The failure gives no addresses but
// does not switch DANE off: the host is used at the secure addresses that came back, under the
// TLSA records (mail goes when the certificate matches, not when it does not), and a host left
// with no address is not delivered to at all. The real test DNS server plays the validating
// resolver behind a UDP proxy that answers SERVFAIL for one name and type; real SMTP server.
import { createHash, X509Certificate } from 'node:crypto';
import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import type { RecipientOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCert, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const test = suite('DANE: a failed address lookup');

const RCODE_SERVFAIL = 2;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();

/** A UDP proxy in front of the test DNS server that answers SERVFAIL to `type` questions for `host`. */
async function servfail(upstreamPort: number, host: string, type: 'A' | 'AAAA'): Promise<{ address: string; close(): void }> {
  const proxy = dgram.createSocket('udp4');
  proxy.on('message', (message, client) => {
    const query = dnsPacket.decode(message);
    const q = query.questions?.[0];
    if (q && q.type === type && q.name.toLowerCase() === host) {
      proxy.send(dnsPacket.encode({ type: 'response', id: query.id, flags: dnsPacket.RECURSION_DESIRED | RCODE_SERVFAIL, questions: query.questions }), client.port, client.address);
      return;
    }
    const upstream = dgram.createSocket('udp4');
    upstream.on('message', (reply) => {
      proxy.send(reply, client.port, client.address);
      upstream.close();
    });
    upstream.send(message, upstreamPort, '127.0.0.1');
  });
  await new Promise<void>((resolve) => proxy.bind(0, '127.0.0.1', resolve));
  return { address: `127.0.0.1:${proxy.address().port}`, close: () => proxy.close() };
}

/**
 * Sends one message to ann@dane.test, whose MX mx.dane.test has the records of `zone` (every
 * answer secure) and a TLSA record (3 1 1) for `tlsaKey`, with the `failing` lookup answered
 * SERVFAIL when given. With the TLS sessions the transport reported.
 */
async function sendTo(sink: SmtpSink, zone: ZoneRecord[], tlsaKey: Buffer, failing: 'A' | 'AAAA' | null): Promise<{ r: RecipientOutcome; sessions: TlsSessionResult[] }> {
  const dnsServer = await startDnsServer([
    { name: 'dane.test', type: 'MX', data: { preference: 10, exchange: 'mx.dane.test' } },
    ...zone,
    { name: `_${sink.port}._tcp.mx.dane.test`, type: 'TLSA', data: { usage: 3, selector: 1, matchingType: 1, certificate: tlsaKey } },
  ]);
  dnsServer.authenticated = () => true;
  const proxy = failing ? await servfail(dnsServer.port, 'mx.dane.test', failing) : null;
  const dns = new DnsCache(new StubResolver({ servers: [proxy?.address ?? dnsServer.address], timeoutMs: 1000, tries: 1, dnssec: true }));
  const sessions: TlsSessionResult[] = [];
  const transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses: new Set(['127.0.0.1']),
    tlsReports: { record: (session) => sessions.push(session) },
  });
  try {
    const outcome = await transport.send({ emailId: 'em_d', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@dane.test'] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: 'd@example.test' });
    return { r: outcome.recipients[0], sessions };
  } finally {
    await transport.close();
    proxy?.close();
    await dnsServer.close();
  }
}

const secureA: ZoneRecord[] = [{ name: 'mx.dane.test', type: 'A', data: '127.0.0.1' }];
const otherKey = sha256(Buffer.from('another key'));

test('AAAA SERVFAIL, secure A, TLSA the certificate does not match: not delivered, deferred naming DANE', async () => {
  const sink = await startSmtpSink({ cert: makeTestCert(['self.example']) });
  try {
    const { r, sessions } = await sendTo(sink, secureA, otherKey, 'AAAA');
    assert.is(r.result, 'deferred', `delivered over TLS the TLSA record does not vouch for: ${r.response}`);
    assert.match(r.response, /DANE/);
    assert.is(sink.messages.length, 0, 'nothing reached the server');
    assert.equal(sessions.map((x) => [x.policy.type, x.result]), [['tlsa', 'validation-failure']]);
  } finally {
    await sink.close();
  }
});

test('AAAA SERVFAIL, secure A, TLSA the certificate matches: delivered at the A address, under DANE', async () => {
  const cert = makeTestCert(['self.example']);
  const sink = await startSmtpSink({ cert });
  try {
    const spki = sha256(new X509Certificate(cert.cert).publicKey.export({ type: 'spki', format: 'der' }));
    const { r, sessions } = await sendTo(sink, secureA, spki, 'AAAA');
    assert.is(r.result, 'delivered', r.response);
    assert.is(sink.messages.length, 1);
    assert.ok(sink.messages[0].secure, 'over TLS');
    assert.equal(sessions.map((x) => [x.policy.type, x.result]), [['tlsa', 'success']], 'the session was judged under DANE');
  } finally {
    await sink.close();
  }
});

test('A SERVFAIL, secure AAAA NODATA: the host has no address left and is not delivered to', async () => {
  const sink = await startSmtpSink({ cert: makeTestCert(['self.example']) });
  try {
    // The A record exists upstream; the proxy's SERVFAIL hides it.
    const { r } = await sendTo(sink, secureA, otherKey, 'A');
    assert.is(r.result, 'deferred', r.response);
    assert.match(r.response, /no address for mx\.dane\.test/);
    assert.is(sink.connections, 0, 'no connection was made');
  } finally {
    await sink.close();
  }
});

test('control: every address lookup answered (AAAA secure NODATA), TLSA not matching: deferred by DANE', async () => {
  const sink = await startSmtpSink({ cert: makeTestCert(['self.example']) });
  try {
    const { r } = await sendTo(sink, secureA, otherKey, null);
    assert.is(r.result, 'deferred', r.response);
    assert.match(r.response, /DANE/);
    assert.is(sink.messages.length, 0);
  } finally {
    await sink.close();
  }
});

test.run();
