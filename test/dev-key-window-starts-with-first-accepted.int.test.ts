// Spec, Limits: a development key has "15 accepted requests per 60-second window, starting with
// the first accepted request", and (rule 3) rejected requests do not count. A send takes its rate
// slot, and opens the key's window, before it is checked (apps/services/admission.ts, step 2); a
// window whose requests are all rejected never started: the release that leaves it without
// slots deletes it, whichever request opened it (apps/services/rate-limits.ts, #dropIfUnused).
// So a burst of refused requests in flight together (a client with a template variable missing,
// retrying in parallel), or a single refused one, leaves no window behind: the key's first
// accepted request 50 s later opens its window, its RateLimit header says it resets in 60 s, and
// the key gets 15 accepted requests in the 60 s from it, not 15 at once and 15 more 10 s after.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Agent, request } from 'undici';
import { startTestApp, type TestApp } from './support/app.ts';
import { createTemplateAs, DASHBOARD_ORIGIN, populateTemplateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ t: TestApp; w: TemplateWorld }>('development key window starts with its first accepted request');
const agent = new Agent({ connections: 128 });

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { listen: true });
  ctx.w = await populateTemplateWorld(ctx.t);
});
test.after(async ({ t }) => {
  await t.close();
  await agent.close();
});

async function send(t: TestApp, key: string, body: unknown) {
  const r = await request(`${t.url}/v1/emails`, {
    method: 'POST', dispatcher: agent,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.statusCode, headers: r.headers, body: await r.body.text() };
}

test('64 refused sends in parallel, then 50 s later: at most 15 accepted in the 60 s from the first accepted one', async ({ t, w }) => {
  await createTemplateAs(w, { slug: 'hello', subject: 'Hi {{name}}', text: 'Hello {{name}}' });
  t.clock.freeze();
  // Refused 422: the template's variable is missing (decided after the rate slot is taken).
  const refused = await Promise.all(Array.from({ length: 64 }, (_, i) =>
    send(t, w.apiKey, { from: `app@${w.domain}`, to: `ann${i}@${w.domain}`, template: 'hello' })));
  assert.equal([...new Set(refused.map((r) => r.status))], [422], 'every request of the burst is rejected');

  t.clock.advance(50_000);
  const valid = (i: number) => ({ from: `app@${w.domain}`, to: `ann@${w.domain}`, subject: `valid ${i}`, text: 'x' });
  const first = await send(t, w.apiKey, valid(0));
  assert.is(first.status, 202, first.body);
  for (let i = 1; i < 15; i++) assert.is((await send(t, w.apiKey, valid(i))).status, 202);
  const sixteenth = await send(t, w.apiKey, valid(15));
  assert.is(sixteenth.status, 429, 'the window of the first accepted request is full');

  // 11 s after the first accepted request: its window runs until 60 s after it.
  t.clock.advance(11_000);
  const later = await Promise.all(Array.from({ length: 15 }, (_, i) => send(t, w.apiKey, valid(100 + i))));
  const admitted = later.filter((r) => r.status === 202).length;
  assert.is(
    admitted, 0,
    `${15 + admitted} requests accepted within 11 s of the first accepted one (limit 15 per 60 s); ` +
    `the first accepted one's RateLimit said ${first.headers.ratelimit} (the window was started by the rejected burst 50 s before)`,
  );
  const wait = Number(later[0].headers['retry-after']);
  assert.ok(wait >= 48 && wait <= 49, `Retry-After ${wait}: the window of the first accepted request ends 49 s from now`);
});

test('one refused send, then 50 s later: the first accepted one opens a 60 s window', async ({ t, w }) => {
  t.clock.advance(120_000); // past the window of the test before
  const refused = await send(t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'hello' });
  assert.is(refused.status, 422, refused.body);

  t.clock.advance(50_000);
  const valid = (i: number) => ({ from: `app@${w.domain}`, to: `ann@${w.domain}`, subject: `single ${i}`, text: 'x' });
  const first = await send(t, w.apiKey, valid(0));
  assert.is(first.status, 202, first.body);
  assert.match(String(first.headers.ratelimit), /^"dev-key";r=14;t=60\b/, 'the window resets 60 s after its first accepted request');
  for (let i = 1; i < 15; i++) assert.is((await send(t, w.apiKey, valid(i))).status, 202);
  t.clock.advance(11_000);
  const sixteenth = await send(t, w.apiKey, valid(15));
  assert.is(sixteenth.status, 429, `${sixteenth.status}: 16 accepted within 11 s (the refused send started the window 50 s before)`);
  assert.is(sixteenth.headers['retry-after'], '49');
});

test.run();
