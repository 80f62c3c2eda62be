// Workspaces share the template rendering thread by the thread time their jobs use, not by
// their number of jobs (infra/threads/worker-queue.ts): a workspace whose template sends each
// hold the thread for the whole time limit (and then end it, its replacement's start-up charged
// to that workspace too) waits while another workspace's sends of a millisecond run, until that
// workspace has used as much. So while one workspace floods the thread with such sends, another
// workspace's burst of ordinary template sends renders within the wait deadline (the time
// limit, 1 s at least) and is accepted (202), rather than each waiting for one of the flooder's
// time limits and most being refused 503 "templates are busy". A development key suffices for
// the flood: a send refused 422 gives its rate slot back.
//
// Set-up as test/template-render-fairness.int.test.ts: the sends are served by a process whose
// template time limit is 150 ms (wait deadline 1 s); the heavy template (40,000 nested <div>)
// holds the thread for the whole limit on every send. The burst has 12 sends: had the flooder
// one turn between each two of them, it would hold the thread for at least 11 × 150 ms
// (1,650 ms > 1 s) meanwhile, and some of the burst would be refused however fast the machine.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LightMyRequestResponse } from 'fastify';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call } from './support/management.ts';
import { createTemplateAs, populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

interface Context { w: TemplateWorld; fast: TestApp; victimKey: string; victimDomain: string }

const test = suite<Context>('template rendering: a flooding workspace and another workspace\'s burst');
const LIMIT_MS = 150;
const BURST = 12;
const IN_FLIGHT = 4;

test.before(async (ctx) => {
  // Saves under a generous limit (the heavy template's rehearsal sanitizes 40,000 nested <div>).
  const t = await startAppIn('embedded', { RELAY_TEMPLATE_TIME_LIMIT_MS: '30000' });
  ctx.w = await populateTemplateWorld(t);
  ctx.fast = await startTestApp({ RELAY_DASHBOARD_ORIGIN: t.config.dashboardOrigin, RELAY_TEMPLATE_TIME_LIMIT_MS: String(LIMIT_MS) }, { dataDir: t.config.dataDir });
  const w = ctx.w;
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
  await createTemplateAs(w, { slug: 'heavy', subject: 'Hi {{n}}', html: `${'<div>'.repeat(40_000)}{{n}}${'</div>'.repeat(40_000)}` });
});

test.after(async (ctx) => {
  await ctx.fast.close();
  await ctx.w.t.close();
});

test('while one workspace floods the rendering thread with sends that each run to the time limit, another workspace\'s burst of 12 quick template sends is accepted', async ({ w, fast, victimKey, victimDomain }) => {
  const victimSend = (i: number) => sendEmail(fast, victimKey, { from: `app@${victimDomain}`, to: `r${i}@${victimDomain}`, template: 'hello', variables: { name: `R${i}` } });
  // The thread is up, and the other workspace's send alone is quick.
  const warm = await victimSend(0);
  assert.is(warm.statusCode, 202, warm.body);

  // The flood: IN_FLIGHT heavy sends at all times, each sent again as soon as it is answered.
  let flooding = true;
  const floodStatuses: number[] = [];
  let firstHeavyAnswered!: () => void;
  const heavyAnswered = new Promise<void>((resolve) => (firstHeavyAnswered = resolve));
  const flooder = async () => {
    while (flooding) {
      const r = await sendEmail(fast, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'heavy', variables: { n: 1 } });
      floodStatuses.push(r.statusCode);
      firstHeavyAnswered();
    }
  };
  const flooders = Array.from({ length: IN_FLIGHT }, flooder);
  // Positive marker that the flood holds the thread: a heavy send was stopped at the time limit.
  await heavyAnswered;
  assert.ok(floodStatuses.includes(422) || floodStatuses.includes(503), `the flood is refused as expected: ${floodStatuses.join(',')}`);

  let burst: LightMyRequestResponse[];
  try {
    burst = await Promise.all(Array.from({ length: BURST }, (_, i) => victimSend(i + 1)));
  } finally {
    flooding = false;
    await Promise.all(flooders);
  }
  const statuses = burst.map((r) => r.statusCode);
  const refused = burst.filter((r) => r.statusCode !== 202);
  assert.is(
    refused.length, 0,
    `the other workspace's ${BURST} quick sends: ${statuses.join(',')} (flood: ${floodStatuses.filter((s) => s === 422).length} stopped at the ${LIMIT_MS} ms limit, ${floodStatuses.filter((s) => s === 503).length} refused busy); first refusal: ${refused[0]?.body}`,
  );
});

test.run();
