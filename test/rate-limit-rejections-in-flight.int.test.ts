// Spec, Limits: a development key has 15 accepted requests per 60-second window, and (rule 3)
// rejected requests do not count. A send takes its rate slot before its sender domain is
// checked and gives it back once refused (apps/services/admission.ts, step 2), so valid sends
// arriving while refused ones are still being checked find the window full of their slots:
// they wait for those slots to be decided (apps/services/rate-limits.ts) rather than be
// answered 429 while the window ends with fewer than 15 accepted requests.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendEmail, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('rate limit: rejections in flight');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async ({ w }) => {
  await w.t.close();
});

const code = (body: string) => (JSON.parse(body) as { error?: { code: string } }).error?.code;

test('15 valid sends in one window are all admitted while the requests around them are rejected', async ({ w }) => {
  w.t.clock.advance(61_000); // a fresh window
  const d = w.domain;
  const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => {
    const valid = i % 2 === 1;
    const body = valid
      ? { from: `app@${d}`, to: `ann@${d}`, subject: `valid ${i}`, text: 'x' }
      // Refused 422 domain_not_verified: a rejection, which the spec says does not count.
      : { from: 'app@unverified.example', to: `ann@${d}`, subject: `refused ${i}`, text: 'x' };
    return sendEmail(w.t, w.apiKey, body).then((r) => ({ valid, status: r.statusCode, body: r.body }));
  }));
  const valid = answers.filter((a) => a.valid);
  const admitted = valid.filter((a) => a.status === 202).length;
  const limited = valid.filter((a) => a.status === 429);
  assert.is(admitted, 15, `only ${admitted} of 15 valid sends were admitted; ${limited.length} were refused: ${limited[0]?.body}`);
  const refused = answers.filter((a) => !a.valid);
  assert.equal(refused.map((a) => `${a.status} ${code(a.body)}`), Array(15).fill('422 domain_not_verified'));

  // The window holds exactly the 15 accepted requests, which kept their slots: the next one
  // is refused at once, not after waiting for them (up to 10 s).
  const started = performance.now();
  const sixteenth = await sendEmail(w.t, w.apiKey, { from: `app@${d}`, to: `ann@${d}`, subject: 'sixteenth', text: 'x' });
  assert.ok(performance.now() - started < 5_000, 'refused without waiting');
  assert.is(sixteenth.statusCode, 429);
  assert.is(code(sixteenth.body), 'rate_limit_exceeded');
  assert.match(String(sixteenth.headers.ratelimit), /^"dev-key";r=0;t=60\b/);
});

test.run();
