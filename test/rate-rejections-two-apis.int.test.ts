// Spec Limits rule 3 ("rejected requests do not count") across two `relay api` processes on one
// embedded data directory, with admission flow control on (as `relay start` has by default, and
// as the docs tell `relay api` to set with RELAY_ADMISSION_BACKLOG_GROUPS). A process cannot
// tell another's undecided rate slot from a kept one, so a request that will be refused must
// give its slot back at once: it is refused before the flow-control wait, which only a send
// that will be stored waits in. Otherwise each refused send held its slot for the whole wait
// and the other process turned valid sends away 429.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deployment, post, type Deployment, type Part } from './support/api-processes.ts';
import { scrape, sumOf } from './support/metrics.ts';

const test = suite<{ d: Deployment; a: Part; b: Part }>('rate limits: sends refused in one API process do not refuse valid sends in the other');

test.before(async (ctx) => {
  // The projector is watched but runs nowhere here: the pipeline is "behind", so every send that will be stored waits 1 s.
  ctx.d = await deployment({ RELAY_ADMISSION_BACKLOG_GROUPS: 'projector', RELAY_ADMISSION_BACKLOG: '1', RELAY_ADMISSION_MAX_WAIT_MS: '1000' });
  ctx.a = await ctx.d.start(['api']);
  ctx.b = await ctx.d.start(['api']);
  const warm = await ctx.d.tenant('production');
  for (let i = 0; i < 3; i++) {
    const r = await post(ctx.a.url, warm.secret, { from: `x@${warm.domain}`, to: 'z@example.com', subject: 'backlog', text: 't' });
    assert.is(r.status, 202);
  }
});

test.after(async (ctx) => {
  await ctx.d?.close();
});

test('15 valid development sends interleaved with 15 refused ones over both processes: all 15 valid are admitted', async ({ d, a, b }) => {
  const t = await d.tenant('development');
  const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => {
    const valid = i % 2 === 1;
    const body = valid
      ? { from: `app@${t.domain}`, to: `ann@${t.domain}`, subject: `valid ${i}`, text: 'x' }
      : { from: 'app@unverified.example', to: `ann@${t.domain}`, subject: `refused ${i}`, text: 'x' };
    // A round-robin load balancer in front of an interleaving client.
    return post(i % 4 < 2 ? a.url : b.url, t.secret, body).then(async (r) => ({ valid, status: r.status, body: await r.text() }));
  }));
  const valid = answers.filter((x) => x.valid);
  const admitted = valid.filter((x) => x.status === 202).length;
  const limited = valid.filter((x) => x.status === 429);
  assert.is(admitted, 15, `only ${admitted} of 15 valid sends admitted (rejected requests counted); ${limited.length} got ${limited[0]?.body}`);
  // A refused send that finds the window full of kept ones is refused for the rate (the rate is checked first).
  assert.ok(answers.filter((x) => !x.valid).every((x) => x.status === 422 || x.status === 429), JSON.stringify(answers.filter((x) => !x.valid).map((x) => x.status)));
});

test('a send refused 422 does not wait for the pipeline; a valid one does', async ({ d, a }) => {
  const t = await d.tenant('development');
  const waits = async () => sumOf(await scrape(a.url), 'relay_admission_flow_waits_total');
  const before = await waits();
  const refused = await post(a.url, t.secret, { from: 'app@unverified.example', to: `ann@${t.domain}`, subject: 'refused', text: 'x' });
  assert.is(refused.status, 422);
  assert.is(await waits(), before, 'the refused send waited in flow control');
  const valid = await post(a.url, t.secret, { from: `app@${t.domain}`, to: `ann@${t.domain}`, subject: 'valid', text: 'x' });
  assert.is(valid.status, 202);
  assert.is(await waits(), before + 1, 'control: a send that is stored waits while the pipeline is behind');
});

test.run();
