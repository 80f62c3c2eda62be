// The sender's site registry (apps/services/delivery/sites.ts) keeps at most 10,000 sites and
// forgets the least recently used to make room, but not one that later transactions depend on:
// a site paused after throttling (for as long as the receiver asked, up to 6 h) keeps its pause,
// and a site with transactions in flight keeps counting them against its connection limit,
// however many new sites (recipient MX sets: addresses at new domains, sign-ups) come meanwhile.
// An idle site is still forgotten at the bound. Driven through the registry's own interface
// (resolve, record, take, started, snapshot) at its default bound.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SiteRegistry } from '../apps/services/delivery/sites.ts';

const test = suite('site registry: which sites make room for new ones');

const DEFAULT_MAX_SITES = 10_000;
const THROTTLED_FOR_AN_HOUR = { result: 'deferred', smtpCode: 421, enhancedCode: '4.7.0', response: '421 4.7.0 Too many messages, try again in 1 hour' };

function clocks() {
  const c = { wall: Date.parse('2026-11-22T10:00:00.000Z'), monotonic: 1_000 };
  return { now: () => c.wall, monotonicNow: () => c.monotonic, pass: (ms: number) => { c.wall += ms; c.monotonic += ms; } };
}

const listed = (sites: SiteRegistry, key: string) => sites.snapshot().some((s) => s.site === key);

test('a site paused for an hour stays paused however many other sites are met during the pause', async () => {
  const clock = clocks();
  const sites = new SiteRegistry({ dns: null, rules: [], now: clock.now, monotonicNow: clock.monotonicNow });
  const big = await sites.resolve('bigmail.test');
  assert.ok(sites.take(big).ok);
  sites.record(big, THROTTLED_FOR_AN_HOUR);
  assert.ok(!sites.take(big).ok, 'paused right after the throttle');
  // Ten minutes of mail to new recipient domains, each its own site.
  for (let i = 0; i < DEFAULT_MAX_SITES; i++) {
    const site = await sites.resolve(`signup${i}.example.test`);
    sites.take(site);
    if (i % 1000 === 0) clock.pass(60_000);
  }
  assert.is(sites.snapshot().length, DEFAULT_MAX_SITES, 'the registry is at its bound: idle sites made room');
  assert.ok(!listed(sites, 'signup0.example.test'), 'the least recently used idle site was forgotten');
  const later = sites.take(big);
  assert.ok(!later.ok, 'bigmail.test asked for an hour\'s pause 10 minutes ago, yet its next message may go at once: the registry forgot the site (and its pause)');
  assert.is(later.retryAt, clock.now() + 50 * 60_000, 'the pause ends an hour after the throttle');
});

test('transactions in flight to a site still count against its connections after many other sites are met', async () => {
  const clock = clocks();
  const sites = new SiteRegistry({ dns: null, rules: [], now: clock.now, monotonicNow: clock.monotonicNow });
  const big = await sites.resolve('bigmail.test');
  const limit = sites.concurrency(big);
  for (let i = 0; i < limit; i++) sites.started(big);
  assert.is(sites.inFlight(big), limit);
  for (let i = 0; i < DEFAULT_MAX_SITES; i++) sites.started(await sites.resolve(`signup${i}.example.test`));
  assert.is(sites.inFlight(big), limit, `${limit} transactions to bigmail.test are still running, the registry counts ${sites.inFlight(big)}: the sender may open more than its ${limit} connections`);
  // Every site is busy: the registry goes past its bound rather than forget one.
  assert.is(sites.snapshot().length, DEFAULT_MAX_SITES + 1);
  for (let i = 0; i < DEFAULT_MAX_SITES; i++) sites.ended(`signup${i}.example.test`);
  await sites.resolve('after.example.test');
  assert.is(sites.snapshot().length, DEFAULT_MAX_SITES, 'once their transactions ended, idle sites make room again, back to the bound');
  assert.ok(listed(sites, big), 'the busy site is still known');
});

test('paused sites are kept past the bound only up to twice it: past that paused sites make room for new ones', async () => {
  const clock = clocks();
  const sites = new SiteRegistry({ dns: null, rules: [], now: clock.now, monotonicNow: clock.monotonicNow, maxSites: 100 });
  for (let i = 0; i < 300; i++) {
    const site = await sites.resolve(`throttling${i}.example.test`);
    sites.take(site);
    sites.record(site, THROTTLED_FOR_AN_HOUR);
  }
  assert.is(sites.snapshot().length, 200);
  assert.ok(sites.snapshot().every((s) => s.pausedUntil !== null), 'every site kept is paused');
  assert.ok(listed(sites, 'throttling299.example.test'), 'the newest site is known');
});

test.run();
