// Template rendering memory is bounded. A template thread has a heap limit
// (TEMPLATE_THREAD_HEAP_MB), and a save, preview or send whose job runs its thread out of
// memory is refused as one past the time limit is (400 at save and preview, 422 naming
// body.variables at send; it was a 500), the thread replaced and the next send rendered. Here
// the API's template threads get a 64 MB heap and a 60 s time limit, so that only memory can
// stop a job: parsing 190,000 {{v}} takes about 250 MB. And the compiled-template cache is
// bounded by the heap its templates keep (estimated from their shape: one of 200,000
// characters of {{v}} keeps about 50 MB), not only by their count.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { newTemplateId } from '../apps/services/templates/template-ids.ts';
import { checkTemplateVariables } from '../domain/templates/variables.ts';
import { CompiledTemplateCache } from '../infra/rendering/compiled-template-cache.ts';
import { compileTemplate } from '../infra/rendering/template-renderer.ts';
import { TemplateThreads } from '../infra/rendering/template-threads.ts';
import { errorCode } from './support/management.ts';
import { populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

interface Context { w: TemplateWorld; original: TemplateThreads; small: TemplateThreads }

const test = suite<Context>('template rendering memory');

test.before(async (ctx) => {
  ctx.w = await populateTemplateWorld(await startAppIn('embedded'));
  ctx.original = ctx.w.t.ctx.services.templates;
  ctx.small = new TemplateThreads({ timeLimitMs: 60_000, heapMb: 64 });
  ctx.w.t.ctx.services.templates = ctx.small;
});

test.after(async (ctx) => {
  ctx.w.t.ctx.services.templates = ctx.original;
  await ctx.small.close();
  await ctx.w.t.close();
});

test('a save, a preview and a send that run their template thread out of memory are refused as past the time limit (400, 422), and the next send renders', async ({ w }) => {
  const text = '{{v}}'.repeat(190_000);
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'huge', slug: 'huge', subject: 'Hi', text } });
  assert.is(saved.statusCode, 400, saved.body);
  assert.is(errorCode(saved), 'validation_error');
  assert.match(saved.json().error.message, /^body: compiling the template needed more memory than a template thread may use; make it smaller or simpler$/);

  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi', text, variables: { v: 'x' } } });
  assert.is(previewed.statusCode, 400, previewed.body);
  assert.match(previewed.json().error.message, /^body: rendering this preview needed more memory than a template thread may use/);

  // Stored as a save under a larger heap would have stored it.
  const at = new Date().toISOString();
  await w.t.ctx.documents.collection(COLLECTIONS.templates).insert({
    _id: newTemplateId(new Date()), projectId: w.projectId, name: 'huge', slug: 'huge', subject: 'Hi', html: null, text, revision: 1, variables: ['v'], createdAt: at, updatedAt: at,
  } as never);
  const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'huge', variables: { v: 'x' } });
  assert.is(sent.statusCode, 422, sent.body);
  assert.is(errorCode(sent), 'invalid_template_variables');
  assert.match(sent.json().error.message, /^body\.variables: rendering the template with these variables needed more memory than a template thread may use$/);

  const small = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'small', slug: 'small', subject: 'Hi {{v}}', text: 'Hello {{v}}' } });
  assert.is(small.statusCode, 201, `the replaced compilation thread compiles: ${small.body}`);
  const after = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'small', variables: { v: 'x' } });
  assert.is(after.statusCode, 202, `the replaced rendering thread renders: ${after.body}`);
});

test('the compiled-template cache keeps templates within a heap budget, estimated from their shape; one larger than the budget is rendered, not kept', async () => {
  const dense = await compileTemplate({ subject: 's', html: null, text: '{{v}}'.repeat(4_000) });
  const plain = await compileTemplate({ subject: 's', html: null, text: 'x'.repeat(20_000) });
  // 20,000 characters either way; 4,000 variables keep about 5 MB, plain text about 100 KB.
  assert.ok(dense.estimatedBytes > 20 * plain.estimatedBytes, `${dense.estimatedBytes} vs ${plain.estimatedBytes}`);
  assert.ok(dense.estimatedBytes > 5_000_000 && dense.estimatedBytes < 10_000_000, String(dense.estimatedBytes));

  const budget = 2.5 * dense.estimatedBytes;
  const cache = new CompiledTemplateCache(500, budget);
  const kept = (id: string) => cache.has(id, 1);
  await cache.get('tpl_a', 1, async () => dense);
  await cache.get('tpl_b', 1, async () => dense);
  await cache.get('tpl_p', 1, async () => plain);
  assert.ok(kept('tpl_a') && kept('tpl_b') && kept('tpl_p'));
  // A third one pushes out the least recently used, though 500 would fit by count.
  await cache.get('tpl_c', 1, async () => dense);
  assert.not.ok(kept('tpl_a'));
  assert.ok(kept('tpl_b') && kept('tpl_c') && kept('tpl_p'));
  assert.ok(cache.bytes <= budget, `${cache.bytes} > ${budget}`);

  const huge = await compileTemplate({ subject: 's', html: null, text: '{{v}}'.repeat(12_000) });
  assert.ok(huge.estimatedBytes > budget);
  const rendered = await cache.get('tpl_huge', 1, async () => huge);
  assert.is(rendered.render(checkTemplateVariables({ v: 'y' })).text, 'y'.repeat(12_000));
  assert.not.ok(kept('tpl_huge'), 'larger than the budget on its own: not kept');
  assert.ok(kept('tpl_b') && kept('tpl_c') && kept('tpl_p'), 'and the others stay');
});

test.run();
