// A destination site's pacing (apps/services/delivery/sites.ts) when the host's wall clock is
// stepped back (an NTP correction): the spacing between messages and a pause after throttling
// are durations, which a step of the wall clock does not change. The sender
// (apps/processors/sender.ts, takeSiteSlot) moves every item of a refused site to the time take()
// names, so that time must be near, as the wall clock reads it after the step: not an hour away
// for a 100 ms gap. The clocks are the OS's as the registry sees them: a step moves the wall
// clock only; time passing moves both.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SiteRegistry } from '../apps/services/delivery/sites.ts';

const test = suite('site pacing after a clock step back');

function clocks() {
  const c = { wall: Date.parse('2026-11-22T10:00:00.000Z'), monotonic: 1_000 };
  return {
    now: () => c.wall,
    monotonicNow: () => c.monotonic,
    step: (ms: number) => {
      c.wall += ms;
    },
    pass: (ms: number) => {
      c.wall += ms;
      c.monotonic += ms;
    },
  };
}

const THROTTLED = { result: 'deferred', smtpCode: 421, enhancedCode: '4.7.28', response: '421 4.7.28 rate limited' };

test('given one message sent to a site (600/min: the next slot 100 ms later), when the clock is stepped back an hour and a second passes, then the site has a free slot', async () => {
  const clock = clocks();
  const sites = new SiteRegistry({ dns: null, rules: [], now: clock.now, monotonicNow: clock.monotonicNow });
  const site = await sites.resolve('gmail.test');
  assert.equal(sites.take(site), { ok: true });
  clock.step(-60 * 60_000);
  clock.pass(1_000);
  const slot = sites.take(site);
  assert.ok(slot.ok, `refused until ${'retryAt' in slot ? `${Math.round((slot.retryAt - clock.now()) / 1000)} s from now` : ''}`);
});

test('given a site just sent to, when the clock is stepped back an hour, then the refused slot is named 100 ms from the wall clock\'s now', async () => {
  const clock = clocks();
  const sites = new SiteRegistry({ dns: null, rules: [], now: clock.now, monotonicNow: clock.monotonicNow });
  const site = await sites.resolve('gmail.test');
  assert.equal(sites.take(site), { ok: true });
  clock.step(-60 * 60_000);
  assert.equal(sites.take(site), { ok: false, retryAt: clock.now() + 100 });
});

test('given a site paused 5 s after a throttling reply, when the clock is stepped back an hour and 11 s pass, then the pause is over', async () => {
  const clock = clocks();
  const sites = new SiteRegistry({ dns: null, rules: [], now: clock.now, monotonicNow: clock.monotonicNow });
  const site = await sites.resolve('busy.test');
  assert.equal(sites.take(site), { ok: true });
  sites.record(site, THROTTLED);
  clock.step(-60 * 60_000);
  assert.equal(sites.take(site), { ok: false, retryAt: clock.now() + 5_000 }, 'paused for the 5 s, counted from the wall clock after the step');
  assert.is(sites.snapshot()[0].pausedUntil, new Date(clock.now() + 5_000).toISOString(), 'the snapshot shows the pause\'s end as a wall time');
  clock.pass(11_000);
  const slot = sites.take(site);
  assert.ok(slot.ok, `refused until ${'retryAt' in slot ? `${Math.round((slot.retryAt - clock.now()) / 1000)} s from now` : ''}`);
  assert.is(sites.snapshot()[0].pausedUntil, null);
});

test.run();
