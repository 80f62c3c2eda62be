// The sender tells the mx transport how long a begun transaction may stay open (the claim
// grace), and the transport carries the transaction on at the next MX host only while that
// grace still covers a whole transaction there at its deadlines (5 min for the envelope, the
// body, 5 min for the reply to the dot: 15 min for a small message). Through the API, with the
// preferred host (127.0.0.2) answering DATA 451 at once and the backup (127.0.0.1) taking
// everything: with the production grace (20 min) the backup gets the message in the first
// attempt; with the grace scaled down by RELAY_DELIVERY_RETRY_SCALE it never covers one, so the
// attempt is delayed without the backup tried.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { startScriptedSmtp, type ScriptedSmtp } from './support/scripted-smtp.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dns: TestDnsServer;
  backup: SmtpSink;
  primary: ScriptedSmtp;
}

const test = suite<Context>('delivery as the MTA: the next MX host after a failed transaction, within the claim grace');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.backup = await startSmtpSink({});
  ctx.primary = await startScriptedSmtp({ data: '451 4.3.0 Try again later' }, { host: '127.0.0.2', port: ctx.backup.port, name: 'mx1.backup.test' });
});

test.after(async (ctx) => {
  ctx.primary.close();
  await ctx.backup.close();
  await ctx.dns.close();
});

async function firstAttempt(ctx: Context, scale: string, to: string) {
  const t: TestApp = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.backup.port),
    RELAY_MX_ALLOW: '127.0.0.1,127.0.0.2',
    RELAY_DELIVERY_RETRY_SCALE: scale,
  }, { processors: true });
  try {
    const tenant = await deliveryTenant(t);
    ctx.dns.setZone([
      ...tenant.zone,
      { name: 'backup.test', type: 'MX', data: { preference: 10, exchange: 'mx1.backup.test' } },
      { name: 'backup.test', type: 'MX', data: { preference: 20, exchange: 'mx2.backup.test' } },
      { name: 'mx1.backup.test', type: 'A', data: '127.0.0.2' },
      { name: 'mx2.backup.test', type: 'A', data: '127.0.0.1' },
    ]);
    const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to, subject: 'Via the backup', text: 'hello' });
    const outcome = await waitForDetail(t, tenant.key, id, (d) => d.events.some((e: any) => ['email.delayed', 'email.delivered'].includes(e.type)), 'has the first attempt\'s outcome');
    return outcome.events.find((e: any) => ['email.delayed', 'email.delivered'].includes(e.type));
  } finally {
    await t.close();
  }
}

test('the production grace covers a transaction at the backup: delivered there in the first attempt', async (ctx) => {
  const connections = ctx.primary.connections;
  const event = await firstAttempt(ctx, '1', 'ann@backup.test');
  assert.is(event.type, 'email.delivered', JSON.stringify(event.payload));
  assert.is(ctx.primary.connections - connections, 1, 'the preferred host was tried first');
  assert.ok(ctx.backup.messages.some((m) => m.rcptTo.some((r) => r.address === 'ann@backup.test')));
});

test('a grace that covers no whole transaction: delayed, the backup not tried', async (ctx) => {
  const connections = ctx.backup.connections;
  const event = await firstAttempt(ctx, '0.001', 'bob@backup.test');
  assert.is(event.type, 'email.delayed', JSON.stringify(event.payload));
  assert.match(event.payload.recipients[0].response, /^mx1\.backup\.test \[127\.0\.0\.2\]: 451 4\.3\.0 Try again later; 1 more MX hosts of backup\.test not tried: /);
  assert.is(ctx.backup.connections - connections, 0, 'no connection to the backup');
});

test.run();
