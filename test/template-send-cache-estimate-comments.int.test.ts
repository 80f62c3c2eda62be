// The rendering thread keeps the compiled templates of sends within a heap budget (128 MiB,
// infra/rendering/template-worker.ts) estimated from each template's shape (RETAINED_BYTES in
// infra/rendering/template-renderer.ts: characters, {{variables}}, blocks, stretches of text).
// Handlebars comments render nothing and are dropped from the parsed template before it is
// compiled and kept, so the estimate bounds what a commented template keeps: 199,000 `{{!}}`
// (995,000 characters, under the 1,000,000 limit) are estimated at 5 MB and keep about 3 MB,
// where their parsed comments alone kept about 50 MB each. Sends of many such templates, each of
// which saves and renders on its own, are all 202: the cache never fills the thread's heap,
// which would end the thread (every workspace's compiled templates lost with it) and refuse
// whichever send was running then (422 "needed more memory than a template thread may use").
//
// The API's template threads get a 256 MB heap here (the production heap is 1,024 MB, which
// takes 26 such templates to fill: the same test then runs for minutes), and a 60 s time limit,
// so that only memory can stop a job on a loaded machine. Eight templates estimated at 40 MB in
// all fit the cache's budget, so it keeps every one: with their comments kept, about 400 MB.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { TemplateThreads } from '../infra/rendering/template-threads.ts';
import { populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

interface Context { w: TemplateWorld; original: TemplateThreads; small: TemplateThreads }

const test = suite<Context>('compiled-template cache: comments');
const TEMPLATES = 8;
/** 995,000 characters of handlebars comments, and one letter to send. */
const COMMENTED = `${'{{!}}'.repeat(199_000)}x`;

test.before(async (ctx) => {
  ctx.w = await populateTemplateWorld(await startAppIn('embedded'));
  ctx.original = ctx.w.t.ctx.services.templates;
  ctx.small = new TemplateThreads({ timeLimitMs: 60_000, heapMb: 256 });
  ctx.w.t.ctx.services.templates = ctx.small;
});

test.after(async (ctx) => {
  ctx.w.t.ctx.services.templates = ctx.original;
  await ctx.small.close();
  await ctx.w.t.close();
});

test('sends of templates that each save and render on their own are not refused for memory: comments are not kept, and the cache of compiled templates stays within its budget', async ({ w }) => {
  const statuses: number[] = [];
  for (let i = 0; i < TEMPLATES; i++) {
    const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: `c${i}`, slug: `c${i}`, subject: 'Hi', html: COMMENTED } });
    assert.is(saved.statusCode, 201, saved.body);
    const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: `c${i}` });
    statuses.push(sent.statusCode);
    assert.is(sent.statusCode, 202, `send ${i + 1} of ${TEMPLATES} (${statuses.join(',')}): ${sent.body}`);
  }
});

test.run();
