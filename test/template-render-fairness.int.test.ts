// Template sends of different workspaces take turns on the one rendering thread
// (infra/rendering/template-threads.ts, infra/threads/worker-queue.ts): while one development
// key floods it with sends of a template whose every rendering runs to the time limit (40,000
// nested <div>: saved by a process with the default 2 s limit, which its sanitizing fits, and
// sent through one whose limit is 150 ms, where each send holds the thread for the whole limit
// and restarts it), another workspace's
// template send waits for at most the one running and is answered 202. The flooding sends
// that cannot start within the wait deadline are refused 503 service_unavailable with
// Retry-After rather than queued without end; the others are 422 past the time limit.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, errorCode } from './support/management.ts';
import { createTemplateAs, populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

interface Context { w: TemplateWorld; fast: TestApp; victimKey: string; victimDomain: string; victimSlug: string; heavySlug: string }

const test = suite<Context>('template rendering: workspaces take turns');
const LIMIT_MS = 150;

test.before(async (ctx) => {
  const t = await startAppIn('embedded');
  ctx.w = await populateTemplateWorld(t);
  // The process that serves the sends: same data, a short template time limit.
  ctx.fast = await startTestApp({ RELAY_DASHBOARD_ORIGIN: t.config.dashboardOrigin, RELAY_TEMPLATE_TIME_LIMIT_MS: String(LIMIT_MS) }, { dataDir: t.config.dataDir });
  const w = ctx.w;
  // The other workspace (the outsider's): its own verified domain, key and template.
  ctx.victimDomain = 'elsewhere.test';
  const project = await t.ctx.documents.collection<{ _id: string; workspaceId: string }>('projects').get(w.foreignProjectId);
  const d = await createDomain(t.ctx.documents, { workspaceId: project!.workspaceId, name: ctx.victimDomain }, t.ctx.now(), t.ctx.services.secrets);
  await markDomainVerified(t.ctx.documents, d._id, 'test fixture', t.ctx.now());
  await connectDomain(t.ctx.documents, d._id, w.foreignProjectId);
  const key = await call(t, 'POST', `/v1/projects/${w.foreignProjectId}/api-keys`, { as: w.outsider, body: { name: 'other', permissions: ['email:send'] } });
  assert.is(key.statusCode, 201, key.body);
  ctx.victimKey = key.json().secret;
  const victim = await templates(t, 'POST', '/v1/templates', { as: w.outsider, projectId: w.foreignProjectId, body: { name: 'hello', slug: 'hello', subject: 'Hello {{name}}', text: 'Hi {{name}}' } });
  assert.is(victim.statusCode, 201, victim.body);
  ctx.victimSlug = 'hello';
  // 40,000 nested <div> (about 440 KB, under the 1,000,000 limit): sanitizing it takes far longer than 150 ms.
  const heavy = await createTemplateAs(w, { slug: 'heavy', subject: 'Hi {{n}}', html: `${'<div>'.repeat(40_000)}{{n}}${'</div>'.repeat(40_000)}` });
  ctx.heavySlug = heavy.slug;
});

test.after(async (ctx) => {
  await ctx.fast.close();
  await ctx.w.t.close();
});

test('behind 10 heavy sends of one key, another workspace\'s template send waits for the running one only; the flood is answered 422 or 503 with Retry-After', async ({ w, fast, victimKey, victimDomain, victimSlug, heavySlug }) => {
  // The thread is up, and the other workspace's send alone is quick.
  const warm = await sendEmail(fast, victimKey, { from: `app@${victimDomain}`, to: `ann@${victimDomain}`, template: victimSlug, variables: { name: 'Ann' } });
  assert.is(warm.statusCode, 202, warm.body);

  // Answers in the order they come back.
  const order: string[] = [];
  const heavy = Array.from({ length: 10 }, () =>
    sendEmail(fast, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: heavySlug, variables: { n: 1 } })
      .then((r) => (order.push(`heavy ${r.statusCode}`), r)));
  await new Promise((resolve) => setImmediate(resolve));
  const started = performance.now();
  const victim = await sendEmail(fast, victimKey, { from: `app@${victimDomain}`, to: `bob@${victimDomain}`, template: victimSlug, variables: { name: 'Bob' } })
    .then((r) => (order.push('other workspace'), r));
  const victimMs = performance.now() - started;
  const attacks = await Promise.all(heavy);

  assert.is(victim.statusCode, 202, victim.body);
  // Its turn came right after the heavy send running when it arrived (at most one more: the
  // one that started while its 202 was being committed). In one line, it waited for all 10 to
  // be rendered. Only rendered sends (422, each holding the thread for the limit) count: a 503 is
  // a send refused at its wait deadline without a turn, which on a slow machine (a thread
  // restarted after each time limit) may come back first.
  const rendered = order.slice(0, order.indexOf('other workspace')).filter((answer) => answer === 'heavy 422').length;
  assert.ok(rendered <= 2, `answered after ${rendered} rendered heavy sends (${victimMs.toFixed(0)} ms, time limit ${LIMIT_MS} ms): ${order.join(', ')}`);

  const statuses = attacks.map((a) => a.statusCode);
  for (const a of attacks) {
    if (a.statusCode === 422) assert.is(errorCode(a), 'invalid_template_variables', a.body);
    else {
      assert.is(a.statusCode, 503, a.body);
      assert.is(errorCode(a), 'service_unavailable', a.body);
      assert.is(a.headers['retry-after'], '1', a.body);
    }
  }
  assert.ok(statuses.includes(422), `the running ones are stopped at the time limit: ${statuses.join(',')}`);
  // 10 renderings of at least 150 ms each cannot all start within the 1 s wait deadline.
  assert.ok(statuses.includes(503), `those that could not start in time are refused: ${statuses.join(',')}`);
});

test.run();
