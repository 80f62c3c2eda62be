// Postfix's own rate-limit reply makes Relay back off. A Postfix MX that limits how much mail
// one client may send (smtpd_client_message_rate_limit, enforced by anvil(8)) answers every MAIL
// FROM over the limit with "450 4.7.1 Error: too much mail from <client address>" (smtpd.c; this
// test gets it from a real Postfix). That reply is about the sender's traffic to the site as a
// whole, the case of the adaptive backoff (docs/delivery.md, Sites): the site counts a throttle
// and slows down, as for Postfix's other client limits ("421 4.7.0 ... too many connections
// from ...", "450 4.7.1 ... too many recipients from ..."). A sender that did not slow down
// would keep itself over the limit, since anvil counts refused requests too.
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { freePort } from './support/free-port.ts';
import { postfixMissing, startPostfix, type PostfixInstance } from './support/postfix.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Context {
  dns: TestDnsServer;
  postfix: PostfixInstance;
  t: TestApp;
  tenant: DeliveryTenant;
}

const MX_HOST = 'mx.limited.test';
const test = skippableSuite<Context>('a Postfix MX over its client message rate limit', postfixMissing());

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  const port = await freePort();
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_DELIVERY_RETRY_SCALE: '0.001',
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns.setZone([
    ...ctx.tenant.zone,
    { name: 'limited.test', type: 'MX', data: { preference: 10, exchange: MX_HOST } },
    { name: MX_HOST, type: 'A', data: '127.0.0.1' },
  ]);
  ctx.postfix = await startPostfix({
    hostname: MX_HOST,
    mailboxes: ['r1@limited.test', 'r2@limited.test', 'r3@limited.test'],
    ports: { mx: port },
    listeners: {
      // Two messages per client per anvil_rate_time_unit (60 s); Relay is a remote client here,
      // not one of the exceptions ($mynetworks by default).
      mx: { smtpd_client_message_rate_limit: '2', smtpd_client_event_limit_exceptions: '' },
    },
  });
});

test.after(async (ctx) => {
  await ctx.t?.close();
  await ctx.postfix?.stop();
  await ctx.dns?.close();
});

test('"450 4.7.1 Error: too much mail from 127.0.0.1" throttles the site: counted, its rate lowered', async ({ t, tenant, postfix }) => {
  for (const n of [1, 2]) {
    const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `r${n}@limited.test`, subject: `n${n}`, text: 'hi' });
    await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered within the limit');
  }
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'r3@limited.test', subject: 'n3', text: 'hi' });
  const delayed = await waitForDetail(t, tenant.key, id, (d) => d.events.some((e: any) => e.type === 'email.delayed'), 'is delayed by the limit');
  await postfix.waitForLog(/Message delivery request rate limit exceeded/, 'anvil\'s limit reached');
  const [reply] = delayed.events.find((e: any) => e.type === 'email.delayed').payload.recipients;
  assert.is(reply.smtpCode, 450, reply.response);
  assert.match(reply.response, /4\.7\.1 Error: too much mail from 127\.0\.0\.1/);
  // The outcome was observed by the site before it was recorded: its state is already there.
  const site = t.ctx.services.sites().snapshot().find((s) => s.site === MX_HOST);
  assert.ok(site, 'the site is known');
  assert.ok(site!.deferred >= 1, 'the site counted the deferral');
  assert.is(site!.throttles >= 1, true, `the site counts Postfix's rate limit as a throttle (throttles ${site!.throttles}, recent ${JSON.stringify(site!.recent)})`);
  // Its pause is over already (RELAY_DELIVERY_RETRY_SCALE shortens it too); its rate stays halved.
  assert.ok(site!.rate < site!.limits.messagesPerMinute, `the site's rate was lowered (${site!.rate} of ${site!.limits.messagesPerMinute} a minute)`);
});

test.run();
