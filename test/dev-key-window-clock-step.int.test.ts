// Spec, Limits: a development key has 15 accepted requests per 60-second window. A window full
// when the host's clock is stepped back an hour (NTP) does not keep running until the clock
// catches up with its end: a clock before the window's start (by more than processes' clocks
// differ) opens the next window (domain/rate-limits.ts, windowRuns).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendEmail, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('development window after a clock step back');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async ({ w }) => w.t.close());

test('a full window, clock stepped back an hour, 61 s later: the key may send again', async ({ w }) => {
  w.t.clock.advance(61_000); // a fresh window
  const body = (i: number) => ({ from: `app@${w.domain}`, to: `ann@${w.domain}`, subject: `s ${i}`, text: 'x' });
  for (let i = 0; i < 15; i++) assert.is((await sendEmail(w.t, w.apiKey, body(i))).statusCode, 202);
  assert.is((await sendEmail(w.t, w.apiKey, body(15))).statusCode, 429, 'the window is full');
  w.t.clock.advance(-60 * 60_000); // NTP steps the clock back one hour
  w.t.clock.advance(61_000); // more than a window's length later
  const r = await sendEmail(w.t, w.apiKey, body(16));
  assert.is(r.statusCode, 202, `${r.statusCode} ${r.body} Retry-After ${r.headers['retry-after']}`);
});

test.run();
