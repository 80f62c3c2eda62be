// A receiver that throttles while a session is set up, as big providers do ("421 4.7.0 Too many
// connections, try again later" as its greeting, or in answer to EHLO, then it closes), makes
// the site back off as a 421 inside a transaction does: the deferral carries the reply's codes,
// so the site is paused and its throttle counted (docs/delivery.md, Adaptive backoff). Real
// test DNS server, a real TCP server on loopback speaking just enough SMTP, the real MX
// transport wrapped by the real site registry (as apps/processors/sender.ts does).
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { observedBySites, SiteRegistry } from '../apps/services/delivery/sites.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { startDnsServer } from './support/dns-server.ts';

const test = suite('mx: a 421 while a session is set up throttles the site');

const BUSY = '421 4.7.0 mx.busy.test Too many connections, try again later\r\n';

/** Sends one message to ann@busy.test, whose MX is a server that talks as `onConnection` says; with the site's state after. */
async function sendToBusy(onConnection: (socket: net.Socket) => void) {
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const dnsServer = await startDnsServer([
    { name: 'busy.test', type: 'MX', data: { preference: 10, exchange: 'mx.busy.test' } },
    { name: 'mx.busy.test', type: 'A', data: '127.0.0.1' },
  ]);
  const dns = new DnsCache(new StubResolver({ servers: [dnsServer.address], timeoutMs: 1000, tries: 1 }));
  const mx = new MxTransport({ dnsServers: [], dns, heloName: 'relay.example.test', port, connectTimeoutMs: 2000, commandTimeoutMs: 2000, allowAddresses: new Set(['127.0.0.1']) });
  const sites = new SiteRegistry({ dns, rules: [] });
  try {
    const outcome = await observedBySites(mx, sites).send({ emailId: 'em_1', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@busy.test'] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: 'x@example.test' });
    return { r: outcome.recipients[0], site: sites.snapshot().find((s) => s.site === 'mx.busy.test') };
  } finally {
    await mx.close();
    server.close();
    await dnsServer.close();
  }
}

test('a 421 greeting: deferred with its codes, the site paused and its throttle counted', async () => {
  const { r, site } = await sendToBusy((socket) => socket.end(BUSY));
  assert.is(r.result, 'deferred');
  assert.is(r.smtpCode, 421, r.response);
  assert.is(r.enhancedCode, '4.7.0');
  assert.match(r.response, /Too many connections/);
  assert.ok(site, 'the site is known');
  assert.is(site!.throttles, 1);
  assert.ok(site!.pausedUntil !== null, 'the site is paused');
});

test('a 421 to EHLO: the same', async () => {
  const { r, site } = await sendToBusy((socket) => {
    socket.write('220 mx.busy.test ESMTP\r\n');
    socket.once('data', () => socket.end(BUSY));
  });
  assert.is(r.result, 'deferred');
  assert.is(r.smtpCode, 421, r.response);
  assert.is(r.enhancedCode, '4.7.0');
  assert.is(site!.throttles, 1);
  assert.ok(site!.pausedUntil !== null, 'the site is paused');
});

test('control: a connection closed without a reply is deferred without codes and throttles nothing', async () => {
  const { r, site } = await sendToBusy((socket) => socket.destroy());
  assert.is(r.result, 'deferred');
  assert.is(r.smtpCode, null, r.response);
  assert.is(site!.throttles, 0);
  assert.is(site!.pausedUntil, null);
});

test.run();
