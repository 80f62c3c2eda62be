// Relay as the MTA (RELAY_DELIVERY=mx), end to end through the API: MX lookups go to a real
// DNS server on loopback, every MX host resolves to 127.0.0.1 (exempted from the public-address
// rule by RELAY_MX_ALLOW) and RELAY_MX_PORT points the connections at one real smtp-server that
// answers by recipient domain, as each domain's own MX would.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dns: TestDnsServer;
  sink: SmtpSink;
  t: TestApp;
  tenant: DeliveryTenant;
  /** RCPT TO answers so far per recipient address. */
  tries: Map<string, number>;
}

const test = suite<Context>('delivery as the MTA (mx)');

const mx = (domain: string, exchange: string, preference = 10): ZoneRecord => ({ name: domain, type: 'MX', data: { preference, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });

test.before(async (ctx) => {
  ctx.tries = new Map();
  ctx.dns = await startDnsServer([]);
  ctx.sink = await startSmtpSink({
    onRcptTo: (address) => {
      const n = (ctx.tries.get(address.address) ?? 0) + 1;
      ctx.tries.set(address.address, n);
      const domain = address.address.split('@')[1];
      if (domain === 'bad.test') return smtpError(550, '5.1.1 No such user here');
      if (domain === 'slow.test' && n === 1) return smtpError(451, '4.7.1 Greylisted, try again later');
    },
    onData: (_raw, session) => (session.envelope.rcptTo.some((r) => r.address.endsWith('@spamfilter.test')) ? { error: smtpError(554, '5.7.1 Message rejected as spam') } : {}),
  });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_DELIVERY_RETRY_SCALE: '0.001',
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns.setZone([
    ...ctx.tenant.zone,
    mx('ok.test', 'mx.ok.test'), loopback('mx.ok.test'),
    mx('bad.test', 'mx.bad.test'), loopback('mx.bad.test'),
    mx('slow.test', 'mx.slow.test'), loopback('mx.slow.test'),
    mx('nullmx.test', '.', 0),
    mx('spamfilter.test', 'mx.spamfilter.test'), loopback('mx.spamfilter.test'),
    // Other non-public addresses stay refused, as every one is in production (loopback ones
    // only, so that nothing would leave the machine even if they were not).
    mx('internal.test', 'mx.internal.test'), { name: 'mx.internal.test', type: 'A', data: '127.0.0.2' }, { name: 'mx.internal.test', type: 'AAAA', data: '::1' },
  ]);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.dns.close();
});

const sendTo = (ctx: Context, to: string | string[], cc: string[] = []) =>
  send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to, ...(cc.length ? { cc } : {}), subject: 'Via MX', text: 'hello' });

test('a domain whose MX answers 250: delivered, deliveredAt set, the signed message at the MX passes DKIM', async (ctx) => {
  const id = await sendTo(ctx, 'ann@ok.test');
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  assert.ok(final.deliveredAt);
  assert.is(final.providerMessageId, `${id}@${ctx.tenant.domain}`, 'the Message-ID');
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.delivered']);
  const arrived = ctx.sink.messages.filter((m) => m.rcptTo.some((r) => r.address === 'ann@ok.test'));
  assert.is(arrived.length, 1);
  const [verdict] = await dkimResults(ctx.dns, arrived[0].raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
});

test('a domain whose MX answers 550: hard_bounced, with the reply in the timeline', async (ctx) => {
  const id = await sendTo(ctx, 'nobody@bad.test');
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounce = final.events.find((e: any) => e.type === 'email.bounced');
  assert.is(bounce.payload.bounce_type, 'hard');
  assert.is(bounce.payload.recipients[0].smtpCode, 550);
  assert.is(bounce.payload.recipients[0].enhancedCode, '5.1.1');
});

test('a content refusal from the MX (554 5.7.1 at DATA) is a soft bounce: the address is not suppressed', async (ctx) => {
  const id = await sendTo(ctx, 'ann@spamfilter.test');
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'soft_bounced', 'is soft_bounced');
  const bounce = final.events.find((e: any) => e.type === 'email.bounced');
  assert.is(bounce.payload.bounce_type, 'soft');
  assert.equal([bounce.payload.recipients[0].smtpCode, bounce.payload.recipients[0].enhancedCode], [554, '5.7.1']);
  const again = await sendTo(ctx, 'ann@spamfilter.test');
  assert.is((await waitForDetail(ctx.t, ctx.tenant.key, again, (d) => d.status === 'soft_bounced', 'is soft_bounced again')).status, 'soft_bounced', 'not suppressed');
});

test('a domain whose MX answers 451 then 250: delayed, then delivered on the retry', async (ctx) => {
  const id = await sendTo(ctx, 'grey@slow.test');
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'delivered', 'is delivered after the retry');
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.delayed', 'email.processing', 'email.delivered']);
  assert.is(ctx.tries.get('grey@slow.test'), 2);
});

test('a null MX (RFC 7505): hard_bounced without any connection to it', async (ctx) => {
  const before = ctx.sink.connections;
  const id = await sendTo(ctx, 'someone@nullmx.test');
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounce = final.events.find((e: any) => e.type === 'email.bounced');
  assert.is(bounce.payload.recipients[0].enhancedCode, '5.1.10');
  assert.is(ctx.sink.connections, before, 'no SMTP connection');
});

test('a domain whose MX resolves only to non-public addresses: hard_bounced with the reason in the timeline, no connection', async (ctx) => {
  const before = ctx.sink.connections;
  const id = await sendTo(ctx, 'ops@internal.test');
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounce = final.events.find((e: any) => e.type === 'email.bounced');
  const [recipient] = bounce.payload.recipients;
  assert.is(recipient.enhancedCode, '5.4.4');
  assert.match(recipient.response, /no MX host of internal\.test has a public address: mx\.internal\.test resolves only to addresses Relay does not deliver to: 127\.0\.0\.2 \(loopback\), ::1 \(loopback\)/);
  assert.is(ctx.sink.connections, before, 'no SMTP connection');
});

test('one email to four domains: each recipient its own outcome; the email shows the highest in the status order', async (ctx) => {
  const id = await sendTo(ctx, ['a@ok.test', 'b@bad.test'], ['c@slow.test', 'd@nullmx.test']);
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.recipients.find((r: any) => r.address === 'c@slow.test')?.status === 'delivered', 'is delivered to c@slow.test');
  assert.equal(final.recipients.map((r: any) => [r.address, r.status]), [
    ['a@ok.test', 'delivered'], ['b@bad.test', 'hard_bounced'], ['c@slow.test', 'delivered'], ['d@nullmx.test', 'hard_bounced'],
  ]);
  assert.is(final.status, 'hard_bounced');
});

test.run();
