// An MX host whose first address throttles while the session is set up ("421 4.7.0 Too many
// connections" as its greeting) and whose next address a required TLS policy refuses (MTA-STS
// enforce: no STARTTLS, or a certificate that does not name the host) still makes the site back
// off: the policy refusal that ends the attempt carries no reply code of its own, and the 421
// the host gave in the same attempt must not be lost with it. The recipient stays deferred.
// Real test DNS server, a real HTTPS policy server, a raw TCP server on 127.0.0.1 giving the
// 421 and a real smtp-server on 127.0.0.2 (same port, as RELAY_MX_PORT is one port), the real
// MX transport wrapped by the real site registry (as apps/processors/sender.ts does).
import net from 'node:net';
import { SMTPServer } from 'smtp-server';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { observedBySites, SiteRegistry } from '../apps/services/delivery/sites.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';

const BUSY = '421 4.7.0 mx.strict.test Too many connections, try again later\r\n';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  policies: PolicyServer;
}

const test = suite<Context>('mx: a 421 from one address of a host survives a TLS policy refusing the next');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.strict.test', 'mta-sts.flip.test']));
  ctx.policies.policies.set('strict.test', policyText('enforce', ['mx.strict.test']));
  ctx.policies.policies.set('flip.test', policyText('enforce', ['mx.flip.test']));
  ctx.dns = await startDnsServer([
    { name: 'strict.test', type: 'MX', data: { preference: 10, exchange: 'mx.strict.test' } },
    // In this order: the transport tries IPv4 addresses as DNS lists them.
    { name: 'mx.strict.test', type: 'A', data: '127.0.0.1' },
    { name: 'mx.strict.test', type: 'A', data: '127.0.0.2' },
    { name: '_mta-sts.strict.test', type: 'TXT', data: 'v=STSv1; id=s1' },
    { name: 'mta-sts.strict.test', type: 'A', data: '127.0.0.1' },
    // The same two servers in the other order: the policy refuses the first address tried.
    { name: 'flip.test', type: 'MX', data: { preference: 10, exchange: 'mx.flip.test' } },
    { name: 'mx.flip.test', type: 'A', data: '127.0.0.2' },
    { name: 'mx.flip.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.flip.test', type: 'TXT', data: 'v=STSv1; id=f1' },
    { name: 'mta-sts.flip.test', type: 'A', data: '127.0.0.1' },
  ]);
});

test.after(async (ctx) => {
  await ctx.policies.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

const listen = (server: net.Server, port: number, host: string) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });

/**
 * Sends `sends` messages in turn to ann@<domain> through one transport: 127.0.0.1 talks as
 * `first` says, 127.0.0.2 is an SMTP server that `secondTls` sets up. With every outcome, the
 * site's state, what each server saw and the TLS sessions reported.
 */
async function sendToStrict(ctx: Context, first: (socket: net.Socket) => void, secondTls: 'none' | 'wrong-name', sends = 1, domain = 'strict.test') {
  const seen = { first: 0, second: 0, mailFrom: 0 };
  const firstServer = net.createServer((socket) => {
    seen.first++;
    socket.on('error', () => {});
    first(socket);
  });
  await listen(firstServer, 0, '127.0.0.1');
  const port = (firstServer.address() as net.AddressInfo).port;
  const cert = ctx.ca.issue(['other.strict.test']);
  const second = new SMTPServer({
    secure: false,
    key: cert.key,
    cert: cert.cert,
    disabledCommands: secondTls === 'none' ? ['STARTTLS'] : [],
    authOptional: true,
    disableReverseLookup: true,
    logger: false,
    closeTimeout: 200,
    onConnect(_session, callback) {
      seen.second++;
      callback();
    },
    onMailFrom(_address, _session, callback) {
      seen.mailFrom++;
      callback();
    },
  });
  second.on('error', () => {});
  await listen(second.server, port, '127.0.0.2');

  const sessions: TlsSessionResult[] = [];
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1', '127.0.0.2']);
  const mx = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000 }),
    tlsReports: { record: (session) => sessions.push(session) },
  });
  const sites = new SiteRegistry({ dns, rules: [] });
  const transport = observedBySites(mx, sites);
  try {
    const outcomes = [];
    for (let i = 0; i < sends; i++) {
      const outcome = await transport.send({ emailId: `em_${i}`, envelope: { mailFrom: 'b@bounce.example.test', recipients: [`ann@${domain}`] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: `${i}@example.test` });
      outcomes.push(outcome.recipients[0]);
    }
    return { outcomes, site: sites.snapshot().find((s) => s.site === `mx.${domain}`), seen, sessions };
  } finally {
    await mx.close();
    firstServer.close();
    await new Promise<void>((resolve) => second.close(() => resolve()));
  }
}

test('421 greeting, then an address without STARTTLS under MTA-STS enforce: deferred with the 421, the site paused and its throttle counted', async (ctx) => {
  const { outcomes: [r], site, seen, sessions } = await sendToStrict(ctx, (socket) => socket.end(BUSY), 'none');
  assert.equal(seen, { first: 1, second: 1, mailFrom: 0 }, 'both addresses were tried; no envelope was sent');
  assert.equal(sessions.map((s) => [s.receivingIp, s.result]), [['127.0.0.2', 'starttls-not-supported']], 'the refusal was reported');
  assert.is(r.result, 'deferred');
  assert.is(r.smtpCode, 421, r.response);
  assert.is(r.enhancedCode, '4.7.0');
  assert.match(r.response, /mx\.strict\.test \[127\.0\.0\.1\]: .*Too many connections/);
  assert.match(r.response, /mx\.strict\.test \[127\.0\.0\.2\]: MTA-STS \(enforce\) of strict\.test/);
  // Not a policy's failure alone: the stage is where the 421 came.
  assert.is(r.stage, 'connection');
  assert.ok(site, 'the site is known');
  assert.is(site!.throttles, 1);
  assert.ok(site!.pausedUntil !== null, 'the site is paused');
});

test('421 to EHLO, then a certificate that does not name the host; and again with the refusal remembered: each time deferred with the 421 and throttling', async (ctx) => {
  const { outcomes, site, seen, sessions } = await sendToStrict(ctx, (socket) => {
    socket.write('220 mx.strict.test ESMTP\r\n');
    socket.once('data', () => socket.end(BUSY));
  }, 'wrong-name', 2);
  assert.equal(seen, { first: 2, second: 1, mailFrom: 0 }, 'the refused address was passed over the second time');
  assert.equal(sessions.map((s) => [s.receivingIp, s.result]), [['127.0.0.2', 'certificate-host-mismatch']]);
  for (const r of outcomes) {
    assert.is(r.result, 'deferred');
    assert.is(r.smtpCode, 421, r.response);
    assert.is(r.enhancedCode, '4.7.0');
    assert.match(r.response, /MTA-STS \(enforce\) of strict\.test: certificate does not name mx\.strict\.test/);
  }
  assert.is(site!.throttles, 2);
  assert.ok(site!.pausedUntil !== null, 'the site is paused');
});

test('control: the first address closes without a reply: deferred as a TLS policy refusal without codes, and nothing throttled', async (ctx) => {
  const { outcomes: [r], site, seen } = await sendToStrict(ctx, (socket) => socket.destroy(), 'none');
  assert.equal(seen, { first: 1, second: 1, mailFrom: 0 });
  assert.is(r.result, 'deferred');
  assert.is(r.smtpCode, null, r.response);
  assert.is(r.enhancedCode, null);
  assert.is(r.stage, 'tls');
  assert.match(r.response, /MTA-STS \(enforce\) of strict\.test/);
  assert.is(site!.throttles, 0);
  assert.is(site!.pausedUntil, null);
});

test('a policy refusal at the first address, then an address that fails without a reply: the refusal is still reported for TLS reporting, and named', async (ctx) => {
  const { outcomes: [r], seen, sessions } = await sendToStrict(ctx, (socket) => socket.destroy(), 'none', 1, 'flip.test');
  assert.equal(seen, { first: 1, second: 1, mailFrom: 0 });
  assert.equal(sessions.map((s) => [s.receivingIp, s.result]), [['127.0.0.2', 'starttls-not-supported']], 'the refusal was reported');
  assert.is(r.result, 'deferred');
  assert.match(r.response, /mx\.flip\.test \[127\.0\.0\.2\]: MTA-STS \(enforce\) of flip\.test/);
});

test.run();
