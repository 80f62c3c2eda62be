// Which sites /metrics names (apps/services/delivery/sites.ts siteSeries), from what the real
// site registry reports: per sender instance the busiest by recent volume (transactions counting
// less with age), those a shaping rule applies to, and the rest as site="other".
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseShapingFile } from '../domain/delivery/sites.ts';
import {
  BUSIEST_SITE_SERIES, OTHER_SITES, SHAPED_SITE_SERIES, SiteRegistry, siteSeries, VOLUME_HALF_LIFE_MS, type SiteSnapshot,
} from '../apps/services/delivery/sites.ts';

const test = suite('site series');

const DELIVERED = { result: 'delivered', smtpCode: 250, enhancedCode: '2.0.0', response: '250 2.0.0 ok' };
const THROTTLED = { result: 'deferred', smtpCode: 421, enhancedCode: '4.7.28', response: '421 4.7.28 rate limited, try again in 10 minutes' };

function registry(shaping = '') {
  const c = { wall: Date.parse('2026-11-22T10:00:00.000Z'), monotonic: 1_000 };
  const sites = new SiteRegistry({ dns: null, rules: parseShapingFile(shaping), now: () => c.wall, monotonicNow: () => c.monotonic });
  const record = async (domain: string, times: number, outcome = DELIVERED) => {
    const key = await sites.resolve(domain);
    for (let i = 0; i < times; i++) sites.record(key, outcome);
  };
  return { sites, record, now: () => c.wall, pass: (ms: number) => { c.wall += ms; c.monotonic += ms; } };
}

test('given more sites than it names, then an instance names its busiest and its shaped ones, and sums the rest into "other"', async () => {
  const r = registry('*.shaped.test messages_per_minute=60\n');
  // 30 busy sites (30 down to 1 transactions), 60 shaped ones with one transaction each, 10 idle-ish.
  for (let i = 0; i < 30; i++) await r.record(`busy${i}.test`, 30 - i);
  for (let i = 0; i < 60; i++) await r.record(`mx${String(i).padStart(2, '0')}.shaped.test`, 1);
  await r.record('quiet.test', 1, THROTTLED);
  const snapshots = r.sites.snapshot();
  assert.is(snapshots.find((s) => s.site === 'busy0.test')?.recentVolume, 30);
  assert.is(snapshots.find((s) => s.site === 'mx00.shaped.test')?.rule, '*.shaped.test');
  assert.is(snapshots.find((s) => s.site === 'busy0.test')?.rule, null);

  const series = siteSeries(snapshots, r.now());
  const named = series.filter((s) => s.site !== OTHER_SITES).map((s) => s.site);
  const busiest = Array.from({ length: BUSIEST_SITE_SERIES }, (_, i) => `busy${i}.test`);
  assert.equal(named.slice(0, BUSIEST_SITE_SERIES), busiest, 'the busiest by volume');
  assert.is(named.length, BUSIEST_SITE_SERIES + SHAPED_SITE_SERIES);
  assert.ok(named.slice(BUSIEST_SITE_SERIES).every((site) => site.endsWith('.shaped.test')), 'then the shaped ones, up to their bound');
  const other = series.filter((s) => s.site === OTHER_SITES);
  assert.is(other.length, 1);
  const folded = snapshots.filter((s) => !named.includes(s.site));
  assert.is(folded.length, snapshots.length - named.length);
  assert.is(other[0].limit, folded.reduce((sum, s) => sum + s.limits.messagesPerMinute, 0), 'limits summed');
  assert.is(other[0].rate, folded.reduce((sum, s) => sum + s.rate, 0), 'rates summed');
  assert.is(other[0].throttles, 1, 'quiet.test\'s throttle counted');
  assert.is(other[0].pausedSeconds, 600, 'the longest pause among them');
});

test('given a site busy long ago and one busy now, then the recent one ranks first: volume halves every half-life', async () => {
  const r = registry();
  await r.record('earlier.test', 8);
  r.pass(4 * VOLUME_HALF_LIFE_MS);
  await r.record('now.test', 1);
  // 8 transactions four half-lives ago count as 0.5; the one just now as 1.
  const snapshots = r.sites.snapshot();
  assert.is(snapshots.find((s) => s.site === 'earlier.test')?.recentVolume, 0.5);
  for (let i = 0; i < BUSIEST_SITE_SERIES - 1; i++) await r.record(`filler${i}.test`, 1);
  const named = siteSeries(r.sites.snapshot(), r.now()).map((s) => s.site);
  assert.ok(named.includes('now.test'));
  assert.not.ok(named.includes('earlier.test'), 'folded into other');
  assert.ok(named.includes(OTHER_SITES));
});

test('given snapshots as stored (two instances, one written an hour ago, one without volume, a site keyed "other"), then each instance is bounded on its own', () => {
  const now = Date.parse('2026-11-22T10:00:00.000Z');
  const snapshot = (instance: string, site: string, recentVolume: number | undefined, updatedAt = now): SiteSnapshot => ({
    _id: `${instance} ${site}`, site, instance, limits: { connections: 5, messagesPerConnection: 100, messagesPerMinute: 600 }, rate: 600,
    pausedUntil: null, throttles: 0, delivered: 1, deferred: 0, inFlight: 0, recent: [], updatedAt: new Date(updatedAt).toISOString(),
    ...(recentVolume === undefined ? {} : { recentVolume, rule: null }),
  });
  const stale = Array.from({ length: 30 }, (_, i) => snapshot('a:1', `stale${i}.test`, 100, now - 6 * VOLUME_HALF_LIFE_MS));
  const fresh = Array.from({ length: 10 }, (_, i) => snapshot('a:1', `fresh${i}.test`, 2));
  const old = Array.from({ length: 30 }, (_, i) => snapshot('b:2', `old${i}.test`, undefined));
  const series = siteSeries([...stale, ...fresh, ...old, snapshot('b:2', OTHER_SITES, 1000)], now);
  const of = (instance: string) => series.filter((s) => s.instance === instance);
  assert.equal(of('a:1').slice(0, 10).map((s) => s.site), fresh.map((s) => s.site), 'volume as of now: 100 six half-lives ago is about 1.6, below 2');
  assert.is(of('a:1').length, BUSIEST_SITE_SERIES + 1);
  assert.is(of('b:2').length, BUSIEST_SITE_SERIES + 1);
  assert.is(of('b:2').filter((s) => s.site === OTHER_SITES).length, 1, 'a site keyed "other" goes into the one "other"');
  assert.is(of('b:2').find((s) => s.site === OTHER_SITES)!.limit, 11 * 600);
});

test.run();
