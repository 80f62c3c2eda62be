// The relay_site_* families' `site` label comes from recipient sites, and a site is a recipient
// domain's MX host set or, with no MX (or a failed lookup), the domain itself: an API client
// names sites at will. /metrics names a bounded few per sender instance (the busiest, those a
// shaping rule applies to) and folds the rest into site="other"; `relay sites` lists them all.
//
// The real app with mx delivery, a real DNS server that knows none of the recipient domains,
// the real smtp-server sink, /metrics over HTTP.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sitesTable } from '../apps/cli/sites-command.ts';
import { BUSIEST_SITE_SERIES, OTHER_SITES, publishSites, siteSnapshots } from '../apps/services/delivery/sites.ts';
import { startTestApp } from './support/app.ts';
import { deliveryTenant, detail, send } from './support/delivery.ts';
import { startDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { scrape } from './support/metrics.ts';
import { startSmtpSink } from './support/smtp-sink.ts';

const DOMAINS = 50;
const SHAPED = 'person-49.example';

test('given one send to 50 made-up domains, then /metrics names the busiest sites, the shaped one and "other"; relay sites lists all 50', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-site-series-'));
  const shaping = join(dir, 'shaping.conf');
  writeFileSync(shaping, `${SHAPED} messages_per_minute=60\n`);
  const dns = await startDnsServer([]);
  const sink = await startSmtpSink();
  const t = await startTestApp({
    RELAY_DELIVERY: 'mx', RELAY_DNS_SERVERS: dns.address, RELAY_MX_PORT: String(sink.port), RELAY_MX_ALLOW: '127.0.0.1', RELAY_DELIVERY_RETRY_SCALE: '0.005',
    RELAY_SHAPING_FILE: shaping,
  }, { processors: true, listen: true });
  try {
    const tenant = await deliveryTenant(t);
    dns.setZone([...tenant.zone]);
    const to = Array.from({ length: DOMAINS }, (_, i) => `someone@person-${i}.example`);
    const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to, subject: 'hi', text: 'hi' });
    await waitUntil(async () => (await detail(t, tenant.key, id)).recipients.every((r: { status: string }) => r.status !== 'queued' && r.status !== 'processing'), 'every recipient has an outcome', 8_000);
    await publishSites(t.stores.documents, t.ctx.services.sites(), (error) => { throw error; }, 60_000).stop();

    const published = await siteSnapshots(t.stores.documents).find({});
    assert.equal(published.map((s) => s.site).sort(), to.map((address) => address.split('@')[1]).sort(), 'each domain without MX is a site of its own');
    assert.is(published.find((s) => s.site === SHAPED)?.rule, SHAPED);
    const table = sitesTable(published);
    for (const s of published) assert.ok(table.includes(s.site), `relay sites lists ${s.site}`);

    const samples = await scrape(t.url!);
    const limits = samples.filter((s) => s.name === 'relay_site_limit_per_minute');
    const sites = new Set(limits.map((s) => s.labels.site));
    assert.ok(sites.size <= BUSIEST_SITE_SERIES + 2, `${sites.size} site label values after one send to ${DOMAINS} domains, e.g. ${[...sites].slice(0, 3).join(', ')}`);
    assert.ok(sites.has(OTHER_SITES), 'the rest together');
    assert.is(limits.find((s) => s.labels.site === SHAPED)?.value, 60, 'the site the shaping file names has its own series');
    const total = (values: number[]) => values.reduce((sum, v) => sum + v, 0);
    assert.is(total(limits.map((s) => s.value)), total(published.map((s) => s.limits.messagesPerMinute)), 'every site counted once, by its own series or in "other"');
    for (const name of ['relay_site_rate_per_minute', 'relay_site_paused_seconds', 'relay_site_throttles']) {
      assert.equal(new Set(samples.filter((s) => s.name === name).map((s) => s.labels.site)), sites, name);
    }
  } finally {
    await t.close();
    await sink.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
