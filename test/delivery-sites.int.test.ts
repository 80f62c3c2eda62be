// Per-site scheduling with adaptive backoff, end to end: mail for two sites (two MX host sets,
// both served on loopback by one real SMTP server that answers by recipient domain). Site A
// answers `421 4.7.28 rate limited` to every second transaction; site B accepts at once.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sitesTable } from '../apps/cli/sites-command.ts';
import { publishSites, siteSnapshots } from '../apps/services/delivery/sites.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dns: TestDnsServer;
  sink: SmtpSink;
  t: TestApp;
  tenant: DeliveryTenant;
  /** Whether site A throttles every second transaction. */
  throttling: boolean;
  transactionsA: number;
}

const mx = (domain: string, exchange: string): ZoneRecord => ({ name: domain, type: 'MX', data: { preference: 10, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });
const SITE_A = 'mx.site-a.test';

const test = suite<Context>('delivery sites');

test.before(async (ctx) => {
  ctx.throttling = true;
  ctx.transactionsA = 0;
  ctx.dns = await startDnsServer([]);
  ctx.sink = await startSmtpSink({
    onRcptTo: (address) => {
      if (!address.address.endsWith('@a.test')) return;
      ctx.transactionsA++;
      if (ctx.throttling && ctx.transactionsA % 2 === 0) return smtpError(421, '4.7.28 rate limited, slow down');
    },
  });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    // Retries, site pauses and spacing two hundred times shorter than in production.
    RELAY_DELIVERY_RETRY_SCALE: '0.005',
  }, { processors: true, listen: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns.setZone([...ctx.tenant.zone, mx('a.test', SITE_A), loopback(SITE_A), mx('b.test', 'mx.site-b.test'), loopback('mx.site-b.test')]);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.dns.close();
});

const siteA = (ctx: Context) => ctx.t.ctx.services.sites().snapshot().find((s) => s.site === SITE_A);

test('site A throttles every second transaction: B is all delivered at once, A backs off and lowers its rate, nothing is lost, the timeline shows the reply', async (ctx) => {
  const { t, tenant } = ctx;
  const ids: Record<'a' | 'b', string[]> = { a: [], b: [] };
  for (let n = 0; n < 20; n++) {
    for (const site of ['a', 'b'] as const) {
      ids[site].push(await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `r${n}@${site}.test`, subject: `to ${site}`, text: 'hi' }));
    }
  }
  let lowestRate = Infinity;
  let pausedSeen = false;
  const statuses = async (list: string[]) => Promise.all(list.map(async (id) => (await detail(t, tenant.key, id)).status as string));
  let bDoneWhileAWaited = false;
  await waitUntil(async () => {
    const a = siteA(ctx);
    if (a) {
      lowestRate = Math.min(lowestRate, a.rate);
      pausedSeen ||= a.pausedUntil !== null;
    }
    const [aStatuses, bStatuses] = [await statuses(ids.a), await statuses(ids.b)];
    if (bStatuses.every((s) => s === 'delivered') && aStatuses.some((s) => s !== 'delivered')) bDoneWhileAWaited = true;
    return [...aStatuses, ...bStatuses].every((s) => s === 'delivered');
  }, 'every email delivered', 90_000).catch(async (error) => {
    const all = [...ids.a, ...ids.b];
    const details = await Promise.all(all.map((id) => detail(t, tenant.key, id)));
    console.log(JSON.stringify(details.map((d) => [d.recipients[0].address, d.status, d.events.map((e: any) => e.type).join(',')])));
    console.log(JSON.stringify(t.ctx.services.sites().snapshot()));
    console.log(JSON.stringify(await t.stores.documents.collection('deliveries').find({ limit: 50 })));
    throw error;
  });

  assert.ok(bDoneWhileAWaited, 'site B was all delivered while site A still had mail waiting');
  for (const id of ids.b) {
    assert.equal((await detail(t, tenant.key, id)).events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.delivered'], 'B never waited');
  }
  const delayed = (await Promise.all(ids.a.map((id) => detail(t, tenant.key, id)))).flatMap((d) => d.events.filter((e: any) => e.type === 'email.delayed'));
  assert.ok(delayed.length > 0, 'some of A\'s mail was delayed');
  for (const entry of delayed) {
    assert.is(entry.payload.recipients[0].smtpCode, 421);
    assert.match(entry.payload.recipients[0].response, /4\.7\.28 rate limited/);
  }
  assert.ok(pausedSeen, 'site A was paused');
  const limit = siteA(ctx)!.limits.messagesPerMinute;
  assert.ok(lowestRate < limit, `A's rate dropped below its limit (${lowestRate} < ${limit})`);
  // Nothing lost, nothing twice: each recipient's mail arrived exactly once.
  for (const site of ['a', 'b']) {
    for (let n = 0; n < 20; n++) {
      assert.is(ctx.sink.messages.filter((m) => m.rcptTo.some((r) => r.address === `r${n}@${site}.test`)).length, 1, `r${n}@${site}.test`);
    }
  }

  // A stops throttling: successes bring its rate back up.
  ctx.throttling = false;
  const before = siteA(ctx)!.rate;
  const more: string[] = [];
  for (let n = 20; n < 60; n++) more.push(await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `r${n}@a.test`, subject: 'to a', text: 'hi' }));
  await waitUntil(async () => (await statuses(more)).every((s) => s === 'delivered'), 'the second batch to A delivered', 60_000);
  assert.ok(siteA(ctx)!.rate > before, `A's rate recovers (${before} → ${siteA(ctx)!.rate})`);

  // What the sender publishes for `relay sites` and /metrics.
  await publishSites(t.stores.documents, t.ctx.services.sites(), (error) => { throw error; }, 60_000).stop();
  const published = await siteSnapshots(t.stores.documents).find({});
  assert.equal(published.map((p) => p.site).sort(), ['mx.site-a.test', 'mx.site-b.test']);
  const table = sitesTable(published);
  assert.match(table, /^SITE\s+INSTANCE\s+CONN\s+PER CONN\s+LIMIT\/MIN\s+RATE\/MIN/);
  assert.match(table, /mx\.site-a\.test .* 421 4\.7\.28 rate limited/);
  const metrics = await (await fetch(`${t.url!}/metrics`)).text();
  assert.match(metrics, /relay_site_rate_per_minute\{site="mx\.site-a\.test",sender_instance="[^"]+"\} \d+/);
  assert.match(metrics, /relay_site_throttles\{site="mx\.site-a\.test",sender_instance="[^"]+"\} [1-9]\d*/);
});

test.run();

// Through the outbox (as through a smarthost) the next hop is Relay's provider, which shapes
// traffic to each receiver itself: no sites, so a shaping file that would allow one message a
// minute to example.org holds nothing up.
const outbox = suite<{ t: TestApp; dir: string }>('no sites outside mx delivery');

outbox.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-sites-outbox-'));
  const shaping = join(ctx.dir, 'shaping.conf');
  writeFileSync(shaping, '*.org messages_per_minute=1 connections=1\n');
  ctx.t = await startTestApp({ RELAY_SHAPING_FILE: shaping }, { processors: true });
});

outbox.after(async (ctx) => {
  await ctx.t.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

outbox('outbox: five emails to one domain are all sent, with no site limits, backoff or site to show', async (ctx) => {
  const tenant = await deliveryTenant(ctx.t);
  const ids: string[] = [];
  for (let n = 0; n < 5; n++) ids.push(await send(ctx.t, tenant.key, { from: `hello@${tenant.domain}`, to: `r${n}@example.org`, subject: 'outbox', text: 'hi' }));
  await waitUntil(async () => (await Promise.all(ids.map(async (id) => (await detail(ctx.t, tenant.key, id)).status))).every((s) => s === 'sent'),
    'all five sent to the outbox (one a minute would have held four back)', 30_000);
  assert.equal(ctx.t.ctx.services.sites().snapshot(), [], 'no site to show in relay sites or /metrics');
});

outbox.run();
