// A site's `connections` limit (RELAY_SHAPING_FILE) holds for recipient domains the sender has
// not looked up yet: the sender's read of due mail (dueBySite in apps/processors/sender.ts)
// passes over an item whose domain's site is not known and looks it up first, so the item is
// scheduled under its real site's key. Before, it was scheduled under the domain itself (a site
// of its own, one connection), so mail for several new domains served by one MX site (custom
// domains on Google Workspace or Microsoft 365) ran at once, up to the transport's per-host
// maximum. Four new domains on one site limited to one connection: the SMTP server, holding each
// DATA for 400 ms, never sees two transactions at once, and every email is delivered.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { dns: TestDnsServer; sink: SmtpSink; t: TestApp; tenant: DeliveryTenant; dir: string; inData: number; maxInData: number }
const test = suite<Context>('delivery: site connections of new domains');
const SHARED = 'mx.shared.test';
const DOMAINS = ['one.test', 'two.test', 'three.test', 'four.test'];

test.before(async (ctx) => {
  ctx.inData = 0;
  ctx.maxInData = 0;
  ctx.dir = mkdtempSync(join(tmpdir(), 'site-connections-'));
  writeFileSync(join(ctx.dir, 'shaping'), `${SHARED} connections=1\n`);
  ctx.dns = await startDnsServer([]);
  ctx.sink = await startSmtpSink({
    onData: async () => {
      ctx.inData++;
      ctx.maxInData = Math.max(ctx.maxInData, ctx.inData);
      await new Promise((resolve) => setTimeout(resolve, 400));
      ctx.inData--;
      return {};
    },
  });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_SHAPING_FILE: join(ctx.dir, 'shaping'),
    RELAY_DELIVERY_RETRY_SCALE: '0.005',
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  const zone: ZoneRecord[] = [...ctx.tenant.zone, { name: SHARED, type: 'A', data: '127.0.0.1' }];
  for (const d of DOMAINS) zone.push({ name: d, type: 'MX', data: { preference: 10, exchange: SHARED } });
  ctx.dns.setZone(zone);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.dns.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('four new domains on one site limited to connections=1: at most one transaction at a time', async (ctx) => {
  const ids = [];
  for (const d of DOMAINS) ids.push(await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: `someone@${d}`, subject: 's', text: 'hi' }));
  for (const id of ids) await waitUntil(async () => (await detail(ctx.t, ctx.tenant.key, id)).status === 'delivered', `${id} is delivered`);
  assert.is(ctx.maxInData, 1, `${ctx.maxInData} transactions to ${SHARED} at once (its shaping rule says connections=1)`);
});

test.run();
