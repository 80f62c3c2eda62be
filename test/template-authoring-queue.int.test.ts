// Saves and previews of different workspaces take turns on the one template compilation thread
// (infra/rendering/template-threads.ts), and a workspace may have only a few of them waiting:
// one viewer session's 20 heavy previews (within its preview rate limit, each well within the
// time limit) are refused 503 service_unavailable with Retry-After beyond its workspace's
// share, and another workspace's template save made meanwhile is not refused: it waits for
// the preview running, not for the viewer's backlog.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { errorCode } from './support/management.ts';
import { populateTemplateWorld, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('template authoring: workspaces take turns');

test.before(async (ctx) => {
  ctx.w = await populateTemplateWorld(await startAppIn('embedded'));
});

test.after(async (ctx) => {
  await ctx.w.t.close();
});

test('one viewer session\'s heavy previews are refused to it beyond its workspace\'s share; another workspace\'s save goes before its backlog', async ({ w }) => {
  // About 20,000 nested elements: sanitizing takes a few hundred ms, under the 2 s limit.
  const heavy = { subject: 'Hi', html: `${'<div>'.repeat(20_000)}{{n}}${'</div>'.repeat(20_000)}`, variables: { n: 1 } };
  const order: string[] = [];
  // One viewer session, 20 previews: within its 30 per 10 s.
  const previews = Array.from({ length: 20 }, () => templates(w.t, 'POST', '/v1/templates/preview', { as: w.viewer, projectId: w.projectId, body: heavy })
    .then((r) => (order.push(`preview ${r.statusCode}`), r)));
  // Once one has been answered (the first refusals come at once), the others are in the queue.
  await Promise.race(previews);
  const saved = await templates(w.t, 'POST', '/v1/templates', {
    as: w.outsider, projectId: w.foreignProjectId, body: { name: 'Welcome', slug: 'welcome', subject: 'Welcome {{name}}', text: 'Hello {{name}}' },
  }).then((r) => (order.push('save'), r));
  const answers = await Promise.all(previews);

  assert.is(saved.statusCode, 201, `another workspace's save: ${saved.statusCode} ${saved.body} (the viewer's previews: ${answers.map((a) => a.statusCode).join(',')})`);
  const rendered = answers.filter((a) => a.statusCode === 200);
  const refused = answers.filter((a) => a.statusCode !== 200);
  assert.ok(rendered.length >= 1, 'the viewer\'s own previews run');
  assert.ok(refused.length >= 1, `beyond its workspace's share they are refused: ${answers.map((a) => a.statusCode).join(',')}`);
  for (const r of refused) {
    assert.is(r.statusCode, 503, r.body);
    assert.is(errorCode(r), 'service_unavailable', r.body);
    assert.is(r.headers['retry-after'], '1', r.body);
  }
  // The save took the next turn: at least one of the viewer's previews admitted before it
  // was rendered after it.
  assert.ok(order.lastIndexOf('preview 200') > order.indexOf('save'), `answers in order: ${order.join(', ')}`);
});

test.run();
