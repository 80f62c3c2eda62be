// Sites shape Relay's own MX delivery only. Through a smarthost the next hop is one server that
// shapes its own traffic: recipient domains are not paced here, even by a shaping rule that
// names one (a one-domain workload would otherwise go at a site's rate, 10 a second by default).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dir: string;
  sink: SmtpSink;
  t: TestApp;
  tenant: DeliveryTenant;
}

const test = suite<Context>('delivery sites through a smarthost');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-shaping-'));
  const shaping = join(ctx.dir, 'shaping.txt');
  // In mx mode this rule would space messages to one.test a minute apart.
  writeFileSync(shaping, 'one.test messages_per_minute=1 connections=1\n');
  ctx.sink = await startSmtpSink();
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    RELAY_SHAPING_FILE: shaping,
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('mail for one recipient domain goes to the smarthost unpaced, and no site is kept', async (ctx) => {
  const { t, tenant } = ctx;
  const ids: string[] = [];
  for (let n = 0; n < 6; n++) ids.push(await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `r${n}@one.test`, subject: 'one domain', text: 'hi' }));
  // Paced at the rule's rate, the second message would wait a minute.
  await waitUntil(async () => ctx.sink.messages.length >= ids.length, 'every message reached the smarthost', 30_000);
  await waitUntil(async () => (await Promise.all(ids.map((id) => detail(t, tenant.key, id)))).every((d) => d.status === 'sent'), 'every email sent', 30_000);
  for (let n = 0; n < 6; n++) assert.is(ctx.sink.messages.filter((m) => m.rcptTo.some((r) => r.address === `r${n}@one.test`)).length, 1, `r${n}@one.test once`);
  assert.equal(t.ctx.services.sites().snapshot(), [], 'no site is shaped or reported');
});

test.run();
