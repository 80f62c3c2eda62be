// A receiver that greylists each new correspondent ("451 4.7.1 Greylisted, try again later") defers
// one sender/recipient/IP triplet, not the sender's rate: the site (every recipient domain on that
// MX set) must neither pause nor slow down for it, while a rate reply from the same site does.
//
// Real test DNS server, the real smtp-server sink, the real MX transport wrapped by the real site
// registry, as apps/processors/sender.ts does.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { observedBySites, SiteRegistry } from '../apps/services/delivery/sites.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { startDnsServer } from './support/dns-server.ts';
import { smtpError, startSmtpSink } from './support/smtp-sink.ts';

const test = suite('a greylisting reply leaves the site alone');

const REPLIES: Record<string, [number, string]> = {
  new: [451, '4.7.1 Greylisted, try again later'],
  limited: [451, '4.7.650 The mail server [127.0.0.1] has been temporarily rate limited due to IP reputation.'],
};

test('given a site that greylists one new recipient, then mail to its other domains goes on at the full rate; a rate reply pauses it', async () => {
  const sink = await startSmtpSink({
    onRcptTo: (address) => {
      const reply = REPLIES[address.address.split('@')[0]];
      return reply ? smtpError(...reply) : undefined;
    },
  });
  const dnsServer = await startDnsServer([
    { name: 'grey.test', type: 'MX', data: { preference: 10, exchange: 'mx.grey.test' } },
    { name: 'other.test', type: 'MX', data: { preference: 10, exchange: 'mx.grey.test' } },
    { name: 'mx.grey.test', type: 'A', data: '127.0.0.1' },
  ]);
  const dns = new DnsCache(new StubResolver({ servers: [dnsServer.address], timeoutMs: 1000, tries: 1 }));
  const mx = new MxTransport({ dnsServers: [], dns, heloName: 'relay.example.test', port: sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses: new Set(['127.0.0.1']) });
  const sites = new SiteRegistry({ dns, rules: [] });
  const transport = observedBySites(mx, sites);
  const send = async (to: string) => (await transport.send({ emailId: 'em_grey', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: 'grey@example.test' })).recipients[0];
  const snapshotOf = (site: string) => sites.snapshot().find((s) => s.site === site)!;
  try {
    const site = await sites.resolve('grey.test');
    assert.is(site, 'mx.grey.test');
    assert.is((await send('known@grey.test')).result, 'delivered');
    const greylisted = await send('new@grey.test');
    assert.equal([greylisted.result, greylisted.smtpCode, greylisted.enhancedCode], ['deferred', 451, '4.7.1']);
    const afterGreylisting = snapshotOf(site);
    assert.is(afterGreylisting.deferred, 1, 'the registry recorded the greylisting reply');
    assert.is(afterGreylisting.throttles, 0, 'not counted as throttling');
    assert.is(afterGreylisting.pausedUntil, null, 'the site is not paused');
    assert.is(afterGreylisting.rate, afterGreylisting.limits.messagesPerMinute, 'the site keeps its rate');
    // The next message of the site, to another domain on the same MX set, may go at once.
    assert.is(await sites.resolve('other.test'), site);
    assert.ok(sites.take(site).ok, 'a slot for the next message');

    const limited = await send('limited@other.test');
    assert.is(limited.enhancedCode, '4.7.650');
    const afterRateReply = snapshotOf(site);
    assert.is(afterRateReply.throttles, 1);
    assert.ok(afterRateReply.pausedUntil !== null, 'a rate reply pauses the site');
    assert.ok(afterRateReply.rate < afterRateReply.limits.messagesPerMinute, 'and lowers its rate');
  } finally {
    await mx.close();
    await sink.close();
    await dnsServer.close();
  }
});

test.run();
