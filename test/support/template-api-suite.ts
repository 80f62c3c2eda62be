// The template endpoints through the real HTTP API, registered once per mode
// (test/templates-api.int.test.ts embedded, test/templates.distributed.int.test.ts distributed).
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { errorCode, signIn } from './management.ts';
import { skippableSuite } from './skippable-suite.ts';
import { createTemplateAs, DASHBOARD_ORIGIN, templates, templateWorld, type Mode, type TemplateJson, type TemplateWorld } from './templates.ts';

const MJML = `<mjml>
  <mj-head><mj-title>Welcome {{name}}</mj-title></mj-head>
  <mj-body>
    <mj-section>
      <mj-column><mj-text>Hello {{name}}, your plan is {{plan}}.</mj-text></mj-column>
      <mj-column><mj-raw><script>alert('raw')</script></mj-raw><mj-button href="{{link}}">Open</mj-button></mj-column>
    </mj-section>
  </mj-body>
</mjml>`;

const expectError = (response: { statusCode: number }, status: number, code: string, fieldPattern?: RegExp) => {
  const r = response as Parameters<typeof errorCode>[0];
  assert.is(r.statusCode, status, r.body);
  assert.is(errorCode(r), code, r.body);
  if (fieldPattern) assert.match(r.json().error.message, fieldPattern);
};

export function templateApiSuite(mode: Mode, skipReason?: string): void {
  const test = skippableSuite<{ w: TemplateWorld }>(`template endpoints (${mode})`, skipReason);

  test.before(async (ctx) => {
    ctx.w = await templateWorld(mode);
  });
  test.after(async (ctx) => {
    await ctx.w?.t.close();
  });

  let slugs = 0;
  const slug = (base = 'tpl') => `${base}-${++slugs}`;

  test('create answers 201 with the Template; variables come from subject, html and text', async ({ w }) => {
    const body = { name: 'Welcome', slug: slug('welcome'), subject: 'Hi {{firstName}}', html: '<p>{{#if vip}}Dear {{firstName}}{{else}}Hello{{/if}} {{! not a variable}}</p>', text: '{{#unless optOut}}{{footer}}{{/unless}} {{firstName}}' };
    const response = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body });
    assert.is(response.statusCode, 201, response.body);
    const template = response.json() as TemplateJson;
    assert.equal(Object.keys(template).sort(), ['createdAt', 'html', 'id', 'name', 'projectId', 'revision', 'slug', 'subject', 'text', 'updatedAt', 'variables']);
    assert.match(template.id, /^[a-zA-Z0-9_-]{1,64}$/);
    assert.is(template.projectId, w.projectId);
    assert.is(template.revision, 1);
    assert.equal(template.variables, ['firstName', 'footer', 'optOut', 'vip']);
    assert.is(template.html, body.html);
    assert.is(template.text, body.text);
    assert.ok(!Number.isNaN(Date.parse(template.createdAt)) && template.createdAt === template.updatedAt);
    const read = await templates(w.t, 'GET', `/v1/templates/${template.id}`, { as: w.owner, projectId: w.projectId });
    assert.is(read.statusCode, 200);
    assert.equal(read.json(), template);
  });

  test('html or text may be left out (stored as null) but not both empty', async ({ w }) => {
    const onlyText = await createTemplateAs(w, { slug: slug(), subject: 's', text: 'plain {{x}}' });
    assert.is(onlyText.html, null);
    assert.equal(onlyText.variables, ['x']);
    const onlyHtml = await createTemplateAs(w, { slug: slug(), subject: 's', html: '<b>{{y}}</b>', text: null });
    assert.is(onlyHtml.text, null);
    for (const body of [{ html: null, text: null }, { html: '', text: '' }, {}, { html: '' }]) {
      expectError(await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: slug(), subject: 's', ...body } }), 400, 'validation_error', /body\.html/);
    }
  });

  test('field limits at their boundaries: name, slug, subject, html, text, no other properties', async ({ w }) => {
    const post = (body: Record<string, unknown>) => templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: slug(), subject: 's', text: 't', ...body } });
    assert.is((await post({ name: 'n'.repeat(100) })).statusCode, 201);
    expectError(await post({ name: 'n'.repeat(101) }), 400, 'validation_error', /body\.name/);
    expectError(await post({ name: '' }), 400, 'validation_error', /body\.name/);
    const slug80 = `${'a'.repeat(40)}-${'b'.repeat(39)}`;
    assert.is(slug80.length, 80);
    assert.is((await post({ slug: slug80 })).statusCode, 201);
    expectError(await post({ slug: `${slug80}c` }), 400, 'validation_error', /body\.slug/);
    for (const bad of ['', 'Upper', 'a--b', '-a', 'a-', 'a_b', 'a b', 'é']) {
      expectError(await post({ slug: bad }), 400, 'validation_error', /body\.slug/);
    }
    assert.is((await post({ slug: slug('0-9') })).statusCode, 201);
    assert.is((await post({ subject: 's'.repeat(998) })).statusCode, 201);
    expectError(await post({ subject: 's'.repeat(999) }), 400, 'validation_error', /body\.subject/);
    expectError(await post({ subject: '' }), 400, 'validation_error', /body\.subject/);
    expectError(await post({ subject: 'a\r\nBcc: x@y.test' }), 400, 'validation_error', /body\.subject/);
    expectError(await post({ subject: 'a\nb' }), 400, 'validation_error', /body\.subject/);
    // Characters, not UTF-16 units: emoji count one each.
    assert.is((await post({ name: '📧'.repeat(100), subject: '📧'.repeat(998) })).statusCode, 201);
    expectError(await post({ name: '📧'.repeat(101) }), 400, 'validation_error', /body\.name/);
    expectError(await post({ subject: '📧'.repeat(999) }), 400, 'validation_error', /body\.subject/);
    assert.is((await post({ html: 'h'.repeat(1_000_000), text: 't'.repeat(1_000_000) })).statusCode, 201);
    assert.is((await post({ text: '📧'.repeat(1_000_000) })).statusCode, 201);
    expectError(await post({ html: 'h'.repeat(1_000_001) }), 400, 'validation_error', /body\.html/);
    expectError(await post({ text: 't'.repeat(1_000_001) }), 400, 'validation_error', /body\.text/);
    expectError(await post({ html: 5 }), 400, 'validation_error', /body\.html/);
    expectError(await post({ revision: 1 }), 400, 'validation_error', /body\.revision/);
    expectError(await post({ variables: {} }), 400, 'validation_error', /body\.variables/);
  });

  test('templates that are not allowed are 400 naming the field: syntax, helpers, partials, unescaped html, bad names', async ({ w }) => {
    const post = (body: Record<string, unknown>) => templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: slug(), subject: 's', text: 't', ...body } });
    expectError(await post({ html: '<p>{{#if x}}open</p>' }), 400, 'validation_error', /body\.html: template syntax/);
    expectError(await post({ subject: 'Hi {{name' }), 400, 'validation_error', /body\.subject: template syntax/);
    expectError(await post({ text: '{{lookup this "constructor"}}' }), 400, 'validation_error', /body\.text: .*helpers are not available/);
    expectError(await post({ html: '{{#each items}}{{this}}{{/each}}' }), 400, 'validation_error', /body\.html: .*\{\{#each\}\}/);
    expectError(await post({ html: '{{#with user}}{{name}}{{/with}}' }), 400, 'validation_error', /body\.html/);
    expectError(await post({ html: '{{> header}}' }), 400, 'validation_error', /body\.html: .*partials/);
    expectError(await post({ html: '{{#*inline "x"}}y{{/inline}}' }), 400, 'validation_error', /body\.html: .*decorators/);
    expectError(await post({ html: '{{log "x"}}' }), 400, 'validation_error', /body\.html/);
    expectError(await post({ html: '{{user.__proto__}}' }), 400, 'validation_error', /body\.html: .*flat/);
    expectError(await post({ html: '{{constructor.constructor}}' }), 400, 'validation_error', /body\.html: .*flat/);
    expectError(await post({ html: '{{@root.x}}' }), 400, 'validation_error', /body\.html/);
    expectError(await post({ html: '{{_private}}' }), 400, 'validation_error', /body\.html: .*variable name/);
    expectError(await post({ html: `{{a${'b'.repeat(64)}}}` }), 400, 'validation_error', /body\.html: .*variable name/);
    assert.is((await post({ html: `{{a${'b'.repeat(63)}}}` })).statusCode, 201, 'a 64-character name is fine');
    expectError(await post({ html: '<p>{{{raw}}}</p>' }), 400, 'validation_error', /body\.html: .*escaped/);
    expectError(await post({ html: '<p>{{& raw}}</p>' }), 400, 'validation_error', /body\.html: .*escaped/);
    // Plain text is not HTML: nothing to escape, so the triple form means the same there.
    assert.is((await post({ text: '{{{raw}}}' })).statusCode, 201);
  });

  test('a slug is unique within a project (409), free in another project', async ({ w }) => {
    const s = slug('unique');
    await createTemplateAs(w, { slug: s, subject: 's', text: 't' });
    expectError(await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'again', slug: s, subject: 's', text: 't' } }), 409, 'conflict', /^body\.slug: .* is already used by another template/);
    const elsewhere = await createTemplateAs(w, { slug: s, subject: 's', text: 't' }, w.owner, w.otherProjectId);
    assert.is(elsewhere.projectId, w.otherProjectId);
  });

  test('concurrent creates with one slug: exactly one wins', async ({ w }) => {
    for (let round = 0; round < 3; round++) {
      const s = slug('race');
      const responses = await Promise.all(Array.from({ length: 8 }, (_, i) =>
        templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: `racer ${i}`, slug: s, subject: 's', text: `t${i}` } })));
      const statuses = responses.map((r) => r.statusCode).sort();
      assert.equal(statuses, [201, 409, 409, 409, 409, 409, 409, 409], `round ${round}`);
      for (const r of responses.filter((x) => x.statusCode === 409)) assert.is(errorCode(r), 'conflict');
      const stored = await w.t.ctx.documents.collection(COLLECTIONS.templates).count({ projectId: w.projectId, slug: s });
      assert.is(stored, 1);
    }
  });

  test('get: 404 for an unknown id and for a template of another project; 400 for a malformed id', async ({ w }) => {
    const mine = await createTemplateAs(w, { slug: slug(), subject: 's', text: 't' });
    const theirs = await createTemplateAs(w, { slug: slug(), subject: 's', text: 't' }, w.owner, w.otherProjectId);
    expectError(await templates(w.t, 'GET', '/v1/templates/tpl_doesnotexist', { as: w.owner, projectId: w.projectId }), 404, 'not_found');
    expectError(await templates(w.t, 'GET', `/v1/templates/${theirs.id}`, { as: w.owner, projectId: w.projectId }), 404, 'not_found');
    expectError(await templates(w.t, 'GET', `/v1/templates/${mine.id}`, { as: w.owner, projectId: w.otherProjectId }), 404, 'not_found');
    const patchBody = { name: 'n', slug: mine.slug, subject: 's', text: 't', revision: 1 };
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const body = method === 'PATCH' ? patchBody : undefined;
      expectError(await templates(w.t, method, `/v1/templates/${'x'.repeat(65)}`, { as: w.owner, projectId: w.projectId, body }), 400, 'validation_error', /path\.id/);
      expectError(await templates(w.t, method, '/v1/templates/a.b', { as: w.owner, projectId: w.projectId, body }), 400, 'validation_error', /path\.id/);
      expectError(await templates(w.t, method, `/v1/templates/${'x'.repeat(64)}`, { as: w.owner, projectId: w.projectId, body }), 404, 'not_found');
    }
  });

  test('projectId is required on every call and follows the id rule', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug(), subject: 's', text: 't' });
    for (const [method, path, body] of [
      ['GET', '/v1/templates', undefined],
      ['POST', '/v1/templates', { name: 'n', slug: slug(), subject: 's', text: 't' }],
      ['GET', `/v1/templates/${t.id}`, undefined],
      ['PATCH', `/v1/templates/${t.id}`, { name: 'n', slug: t.slug, subject: 's', text: 't', revision: 1 }],
      ['DELETE', `/v1/templates/${t.id}`, undefined],
      ['POST', '/v1/templates/preview', { subject: 's' }],
    ] as const) {
      expectError(await templates(w.t, method, path, { as: w.owner, body }), 400, 'validation_error', /query\.projectId/);
      expectError(await templates(w.t, method, path, { as: w.owner, body, projectId: 'bad id!' }), 400, 'validation_error', /query\.projectId/);
      expectError(await templates(w.t, method, path, { as: w.owner, body, projectId: 'p'.repeat(65) }), 400, 'validation_error', /query\.projectId/);
      expectError(await templates(w.t, method, path, { as: w.owner, body, projectId: '' }), 400, 'validation_error', /query\.projectId/);
      // 64 characters of the allowed ones pass validation: such a project just does not exist.
      expectError(await templates(w.t, method, path, { as: w.owner, body, projectId: `A-z_9${'p'.repeat(59)}` }), 404, 'not_found');
      expectError(await templates(w.t, method, path, { as: w.owner, body, projectId: 'prj_unknown' }), 404, 'not_found');
    }
  });

  test('list: newest first, keyset pages, limit 1 to 100 (default 50), summaries without bodies, own project only', async ({ w }) => {
    const project = (await w.t.app.inject({ method: 'POST', url: `/v1/workspaces/${w.workspaceId}/projects`, headers: { cookie: w.owner.cookie }, payload: { name: 'Listing', environment: 'development' } })).json().id as string;
    const made: TemplateJson[] = [];
    for (let i = 0; i < 53; i++) made.push(await createTemplateAs(w, { slug: `list-${i}`, subject: `s${i} {{v${i}}}`, html: `<p>${i}</p>` }, w.owner, project));
    await createTemplateAs(w, { slug: 'list-elsewhere', subject: 's', text: 't' }, w.owner, w.otherProjectId);
    const first = await templates(w.t, 'GET', '/v1/templates', { as: w.owner, projectId: project });
    assert.is(first.statusCode, 200);
    const page1 = first.json() as { templates: Array<Record<string, unknown>>; next_cursor: string | null };
    assert.is(page1.templates.length, 50);
    for (const summary of page1.templates) {
      assert.equal(Object.keys(summary).sort(), ['createdAt', 'id', 'name', 'projectId', 'revision', 'slug', 'subject', 'updatedAt', 'variables']);
    }
    assert.not.ok(first.body.includes('<p>'), 'no html (nor text) in the list');
    assert.is(page1.templates[0].id, made[52].id, 'newest first');
    assert.equal(page1.templates[0].variables, ['v52']);
    assert.is(page1.next_cursor, page1.templates[49].id);
    const page2 = (await templates(w.t, 'GET', `/v1/templates?cursor=${page1.next_cursor}`, { as: w.owner, projectId: project })).json();
    assert.equal(page2.templates.map((x: TemplateJson) => x.id), [made[2].id, made[1].id, made[0].id]);
    assert.is(page2.next_cursor, null);
    const all: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { templates: TemplateJson[]; next_cursor: string | null } = (await templates(w.t, 'GET', `/v1/templates?limit=7${cursor ? `&cursor=${cursor}` : ''}`, { as: w.owner, projectId: project })).json();
      all.push(...page.templates.map((x: TemplateJson) => x.id));
      cursor = page.next_cursor;
    } while (cursor);
    assert.equal(all, made.map((m) => m.id).reverse(), 'every template once, in order');
    const exact = (await templates(w.t, 'GET', '/v1/templates?limit=53', { as: w.owner, projectId: project })).json();
    assert.is(exact.templates.length, 53);
    assert.is(exact.next_cursor, null, 'no further page when the last one is exactly full');
    assert.is((await templates(w.t, 'GET', '/v1/templates?limit=100', { as: w.owner, projectId: project })).json().templates.length, 53);
    assert.is((await templates(w.t, 'GET', '/v1/templates?limit=1', { as: w.owner, projectId: project })).json().templates.length, 1);
    for (const bad of ['limit=0', 'limit=101', 'limit=x', 'cursor=', `cursor=${'c'.repeat(65)}`, 'cursor=a.b', 'other=1']) {
      expectError(await templates(w.t, 'GET', `/v1/templates?${bad}`, { as: w.owner, projectId: project }), 400, 'validation_error', /query\./);
    }
  });

  test('patch replaces the content from the current revision; the next revision is one higher', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('edit'), subject: 'Old {{a}}', html: '<p>{{b}}</p>', text: 'old {{c}}' });
    const response = await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.developer, projectId: w.projectId, body: { name: 'Renamed', slug: slug('edited'), subject: 'New {{d}}', text: 'new', revision: 1 } });
    assert.is(response.statusCode, 200, response.body);
    const updated = response.json() as TemplateJson;
    assert.equal(Object.keys(updated).sort(), ['createdAt', 'html', 'id', 'name', 'projectId', 'revision', 'slug', 'subject', 'text', 'updatedAt', 'variables']);
    assert.is(updated.id, t.id);
    assert.is(updated.revision, 2);
    assert.is(updated.name, 'Renamed');
    assert.is(updated.html, null, 'left out = replaced by null');
    assert.is(updated.text, 'new');
    assert.equal(updated.variables, ['d']);
    assert.is(updated.createdAt, t.createdAt);
    assert.equal((await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.viewer, projectId: w.projectId })).json(), updated);
    // Stale and future revisions are both refused; so is the old slug's owner losing it.
    expectError(await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: updated.slug, subject: 's', text: 't', revision: 1 } }), 409, 'conflict', /revision/);
    expectError(await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: updated.slug, subject: 's', text: 't', revision: 3 } }), 409, 'conflict', /revision/);
    const third = await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: updated.slug, subject: 's', text: 't', revision: 2 } });
    assert.is(third.json().revision, 3);
  });

  test('patch: 400 for a revision below 1 or missing, for invalid content; 404 unknown or another project; 409 slug taken', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug(), subject: 's', text: 't' });
    const other = await createTemplateAs(w, { slug: slug('taken'), subject: 's', text: 't' });
    const theirs = await createTemplateAs(w, { slug: slug(), subject: 's', text: 't' }, w.owner, w.otherProjectId);
    const patch = (id: string, body: Record<string, unknown>, projectId = w.projectId) =>
      templates(w.t, 'PATCH', `/v1/templates/${id}`, { as: w.owner, projectId, body: { name: 'n', slug: t.slug, subject: 's', text: 't', revision: 1, ...body } });
    expectError(await patch(t.id, { revision: 0 }), 400, 'validation_error', /body\.revision/);
    expectError(await patch(t.id, { revision: 1.5 }), 400, 'validation_error', /body\.revision/);
    expectError(await patch(t.id, { revision: undefined }), 400, 'validation_error', /body\.revision/);
    expectError(await patch(t.id, { name: undefined }), 400, 'validation_error', /body\.name/);
    expectError(await patch(t.id, { slug: undefined }), 400, 'validation_error', /body\.slug/);
    expectError(await patch(t.id, { subject: undefined }), 400, 'validation_error', /body\.subject/);
    expectError(await patch(t.id, { revision: '1' }), 400, 'validation_error', /body\.revision/);
    expectError(await patch(t.id, { revision: -1 }), 400, 'validation_error', /body\.revision/);
    expectError(await patch(t.id, { name: 'n'.repeat(101) }), 400, 'validation_error', /body\.name/);
    expectError(await patch(t.id, { subject: 's'.repeat(999) }), 400, 'validation_error', /body\.subject/);
    expectError(await patch(t.id, { text: 't'.repeat(1_000_001) }), 400, 'validation_error', /body\.text/);
    expectError(await patch(t.id, { text: null }), 400, 'validation_error', /body\.html/);
    expectError(await patch(t.id, { html: '{{#each x}}{{/each}}' }), 400, 'validation_error', /body\.html/);
    expectError(await patch(t.id, { extra: true }), 400, 'validation_error', /body\.extra/);
    expectError(await patch('tpl_unknown', {}), 404, 'not_found');
    expectError(await patch(theirs.id, { slug: theirs.slug }), 404, 'not_found');
    expectError(await patch(t.id, {}, w.otherProjectId), 404, 'not_found');
    expectError(await patch(t.id, { slug: other.slug }), 409, 'conflict', /^body\.slug: .* is already used by another template/);
    const unchanged = (await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId })).json();
    assert.is(unchanged.revision, 1, 'no refused patch changed it');
  });

  test('concurrent patches carrying the same revision: exactly one wins', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('contended'), subject: 's', text: 'v0' });
    let revision = 1;
    for (let round = 0; round < 3; round++) {
      const responses = await Promise.all(Array.from({ length: 8 }, (_, i) =>
        templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: t.slug, subject: 's', text: `round ${round} writer ${i}`, revision } })));
      const winners = responses.filter((r) => r.statusCode === 200);
      assert.is(winners.length, 1, `round ${round}: ${responses.map((r) => r.statusCode).join(',')}`);
      for (const r of responses.filter((x) => x.statusCode !== 200)) expectError(r, 409, 'conflict');
      const stored = (await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId })).json();
      assert.is(stored.revision, revision + 1);
      assert.is(stored.text, winners[0].json().text, 'the stored content is the winner\'s');
      revision++;
    }
  });

  test('delete answers {deleted: true}; the id is then gone and the slug free; 404 unknown or another project', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('doomed'), subject: 's', text: 't' });
    const theirs = await createTemplateAs(w, { slug: slug(), subject: 's', text: 't' }, w.owner, w.otherProjectId);
    expectError(await templates(w.t, 'DELETE', `/v1/templates/${theirs.id}`, { as: w.owner, projectId: w.projectId }), 404, 'not_found');
    expectError(await templates(w.t, 'DELETE', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.otherProjectId }), 404, 'not_found');
    const deleted = await templates(w.t, 'DELETE', `/v1/templates/${t.id}`, { as: w.developer, projectId: w.projectId });
    assert.is(deleted.statusCode, 200);
    assert.equal(deleted.json(), { deleted: true });
    expectError(await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId }), 404, 'not_found');
    expectError(await templates(w.t, 'DELETE', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId }), 404, 'not_found');
    expectError(await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: t.slug, subject: 's', text: 't', revision: 1 } }), 404, 'not_found');
    const again = await createTemplateAs(w, { slug: t.slug, subject: 's', text: 't' });
    assert.is.not(again.id, t.id);
    assert.ok((await templates(w.t, 'GET', `/v1/templates/${theirs.id}`, { as: w.owner, projectId: w.otherProjectId })).statusCode === 200);
  });

  test('401 without a session on every endpoint, before validation', async ({ w }) => {
    for (const [method, path, body] of [
      ['GET', '/v1/templates', undefined],
      ['POST', '/v1/templates', { nonsense: true }],
      ['GET', '/v1/templates/tpl_x', undefined],
      ['PATCH', '/v1/templates/tpl_x', {}],
      ['DELETE', '/v1/templates/tpl_x', undefined],
      ['POST', '/v1/templates/preview', {}],
    ] as const) {
      expectError(await templates(w.t, method, path, { projectId: w.projectId, body }), 401, 'session_required');
      expectError(await templates(w.t, method, path, { as: 'rr_session=forged-token', projectId: w.projectId, body }), 401, 'session_required');
    }
  });

  test('403 for non-members everywhere, for viewers on writes; viewers read and preview', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('guarded'), subject: 'Hi {{n}}', text: 't' });
    const reads = [
      ['GET', '/v1/templates', undefined],
      ['GET', `/v1/templates/${t.id}`, undefined],
      ['POST', '/v1/templates/preview', { subject: 'Hi {{n}}', variables: { n: 1 } }],
    ] as const;
    const writes = [
      ['POST', '/v1/templates', { name: 'n', slug: slug(), subject: 's', text: 't' }],
      ['PATCH', `/v1/templates/${t.id}`, { name: 'n', slug: t.slug, subject: 's', text: 't', revision: 1 }],
      ['DELETE', `/v1/templates/${t.id}`, undefined],
    ] as const;
    for (const [method, path, body] of [...reads, ...writes]) {
      expectError(await templates(w.t, method, path, { as: w.outsider, projectId: w.projectId, body }), 403, 'forbidden');
    }
    for (const [method, path, body] of reads) {
      const r = await templates(w.t, method, path, { as: w.viewer, projectId: w.projectId, body });
      assert.is(r.statusCode, 200, `viewer ${method} ${path}: ${r.body}`);
    }
    for (const [method, path, body] of writes) {
      expectError(await templates(w.t, method, path, { as: w.viewer, projectId: w.projectId, body }), 403, 'forbidden');
    }
    // The outsider's own project is theirs; our template is not found there.
    expectError(await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.outsider, projectId: w.foreignProjectId }), 404, 'not_found');
    const still = (await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId })).json();
    assert.is(still.revision, 1, 'refused writes changed nothing');
  });

  test('a browser write from a foreign Origin is refused; the dashboard Origin and reads from anywhere pass', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('origin'), subject: 's', text: 't' });
    const evil = { origin: 'https://evil.example' };
    for (const [method, path, body] of [
      ['POST', '/v1/templates', { name: 'n', slug: slug(), subject: 's', text: 't' }],
      ['PATCH', `/v1/templates/${t.id}`, { name: 'n', slug: t.slug, subject: 's', text: 't', revision: 1 }],
      ['DELETE', `/v1/templates/${t.id}`, undefined],
      ['POST', '/v1/templates/preview', { subject: 's' }],
    ] as const) {
      expectError(await templates(w.t, method, path, { as: w.owner, projectId: w.projectId, body, headers: evil }), 403, 'origin_not_allowed');
      expectError(await templates(w.t, method, path, { as: w.owner, projectId: w.projectId, body, headers: { 'sec-fetch-site': 'cross-site' } }), 403, 'origin_not_allowed');
    }
    assert.is((await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, headers: evil })).statusCode, 200);
    const fromDashboard = await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, headers: { origin: DASHBOARD_ORIGIN }, body: { name: 'n', slug: t.slug, subject: 's', text: 't', revision: 1 } });
    assert.is(fromDashboard.statusCode, 200, fromDashboard.body);
  });

  test('preview of an MJML template: responsive HTML, variables merged and escaped, <script> removed, nothing stored', async ({ w }) => {
    const before = await w.t.ctx.documents.collection(COLLECTIONS.templates).count();
    const response = await templates(w.t, 'POST', '/v1/templates/preview', {
      as: w.owner,
      projectId: w.projectId,
      body: { subject: 'Welcome {{name}} & co', html: MJML, text: 'Hi {{name}}, plan {{plan}}', variables: { name: 'Ann <ann@x>', plan: 'Pro', link: 'https://example.test/start?a=1&b=2' } },
    });
    assert.is(response.statusCode, 200, response.body);
    const preview = response.json() as { subject: string; html: string; text: string };
    assert.equal(Object.keys(preview).sort(), ['html', 'subject', 'text']);
    assert.is(preview.subject, 'Welcome Ann <ann@x> & co', 'subject is plain text');
    assert.is(preview.text, 'Hi Ann <ann@x>, plan Pro', 'text is plain text');
    const html = preview.html;
    assert.match(html, /^<!doctype html>/i);
    assert.match(html, /@media only screen and \(min-width:480px\)/, 'responsive media queries kept');
    assert.match(html, /mj-column-per-50/, 'two columns at 50% each');
    assert.match(html, /<meta name="viewport"/);
    assert.match(html, /Hello Ann &lt;ann@x&gt;, your plan is Pro\./, 'variables merged, HTML-escaped');
    assert.match(html, /<title>Welcome Ann &lt;ann@x&gt;<\/title>/);
    assert.match(html, /href="https:\/\/example\.test\/start\?a=1&amp;b=2"/);
    assert.not.match(html, /<script/i);
    assert.not.match(html, /alert\('raw'\)/);
    assert.not.match(html, /\{\{/, 'no handlebars left');
    assert.is(await w.t.ctx.documents.collection(COLLECTIONS.templates).count(), before, 'preview stores nothing');
  });

  test('preview sanitizes html: no script, no event handlers, no javascript: URLs, also when a variable brings them', async ({ w }) => {
    const response = await templates(w.t, 'POST', '/v1/templates/preview', {
      as: w.owner,
      projectId: w.projectId,
      body: {
        subject: 's',
        html: '<div onclick="steal()"><script>steal()</script><a href="{{link}}" onmouseover="x()">go</a><img src="{{img}}" onerror="x()"><a href="JaVaScRiPt:alert(1)">b</a><iframe src="https://x.test"></iframe><p style="color:red">{{name}}</p></div>',
        variables: { link: 'javascript:alert(document.cookie)', img: 'https://cdn.example.test/a.png', name: '<script>alert(1)</script>' },
      },
    });
    assert.is(response.statusCode, 200, response.body);
    const { html, text } = response.json();
    assert.not.match(html, /<script/i);
    assert.not.match(html, /\bon[a-z]+=/i);
    assert.not.match(html, /javascript:/i);
    assert.not.match(html, /<iframe/i);
    assert.match(html, /<img src="https:\/\/cdn\.example\.test\/a\.png" \/>/);
    assert.match(html, /<p style="color:red">&lt;script&gt;alert\(1\)&lt;\/script&gt;<\/p>/);
    assert.is(text, '', 'no text part when there is no text');
  });

  test('preview: variables follow TemplateVariables (422) at their boundaries; a used variable left out is 422 naming it', async ({ w }) => {
    // A session of its own: previews are rate-limited per session, and this test makes many.
    const author = { ...w.owner, cookie: await signIn(w.t, w.owner.email) };
    const preview = (variables: unknown, extra: Record<string, unknown> = {}) =>
      templates(w.t, 'POST', '/v1/templates/preview', { as: author, projectId: w.projectId, body: { subject: 'Hi {{name}}', text: '{{#if flag}}{{count}}{{/if}}', variables, ...extra } });
    const ok = await preview({ name: 'n', flag: true, count: 3 });
    assert.is(ok.statusCode, 200, ok.body);
    assert.is(ok.json().text, '3');
    const long = await templates(w.t, 'POST', '/v1/templates/preview', { as: author, projectId: w.projectId, body: { subject: 's', text: '{{long}}', variables: { long: 'n'.repeat(10_000) } } });
    assert.is(long.json().text, 'n'.repeat(10_000), 'a 10,000-character string');
    assert.is((await preview({ name: 'x', flag: false, count: 0 })).json().text, '');
    expectError(await preview({ name: 'n'.repeat(10_001), flag: true, count: 3 }), 422, 'invalid_template_variables', /body\.variables\.name: strings are at most 10000/);
    expectError(await preview({ flag: true, count: 3 }), 422, 'invalid_template_variables', /body\.variables\.name: .*name/);
    expectError(await preview({ name: 'x', count: 3 }), 422, 'invalid_template_variables', /body\.variables\.flag/);
    expectError(await preview(undefined), 422, 'invalid_template_variables', /body\.variables\.count/);
    const hundred = Object.fromEntries(Array.from({ length: 97 }, (_, i) => [`v${i}`, i]));
    assert.is((await preview({ ...hundred, name: 'x', flag: true, count: 1 })).statusCode, 200, '100 variables');
    expectError(await preview({ ...hundred, extra: 1, name: 'x', flag: true, count: 1 }), 422, 'invalid_template_variables', /body\.variables: at most 100/);
    const emoji = await templates(w.t, 'POST', '/v1/templates/preview', { as: author, projectId: w.projectId, body: { subject: 's', text: '{{long}}', variables: { long: '🎉'.repeat(10_000) } } });
    assert.is(emoji.statusCode, 200, 'a string of 10,000 characters counts characters, not UTF-16 units');
    expectError(await preview({ name: '🎉'.repeat(10_001), flag: true, count: 3 }), 422, 'invalid_template_variables', /body\.variables\.name/);
    const name64 = `a${'b'.repeat(63)}`;
    assert.is((await preview({ [name64]: 1, name: 'x', flag: true, count: 1 })).statusCode, 200, 'a 64-character name');
    expectError(await preview({ [`${name64}c`]: 1, name: 'x', flag: true, count: 1 }), 422, 'invalid_template_variables', /body\.variables\.ab+c/);
    for (const bad of ['1abc', '_abc', 'a-b', 'a.b', 'é']) {
      expectError(await preview({ [bad]: 1, name: 'x', flag: true, count: 1 }), 422, 'invalid_template_variables', /body\.variables\./);
    }
    for (const value of [null, { nested: 1 }, ['a'], []]) {
      expectError(await preview({ name: value, flag: true, count: 1 }), 422, 'invalid_template_variables', /body\.variables\.name/);
    }
    for (const variables of ['text', 42, ['a'], null]) {
      expectError(await preview(variables), 422, 'invalid_template_variables', /body\.variables/);
    }
    assert.equal((await preview({ name: 2.5, flag: 'yes', count: false })).json(), { subject: 'Hi 2.5', html: '', text: 'false' });
  });

  test('preview: a rendered subject containing CR or LF is 422; template errors are 400', async ({ w }) => {
    const author = { ...w.owner, cookie: await signIn(w.t, w.owner.email) };
    const preview = (body: Record<string, unknown>) => templates(w.t, 'POST', '/v1/templates/preview', { as: author, projectId: w.projectId, body });
    expectError(await preview({ subject: 'Hi {{name}}', variables: { name: 'x\r\nBcc: victim@example.test' } }), 422, 'invalid_template_variables', /body\.variables\.name: .*CR or LF/);
    expectError(await preview({ subject: 'Hi {{name}}', variables: { name: 'x\ny' } }), 422, 'invalid_template_variables', /CR or LF/);
    expectError(await preview({ subject: 'Hi {{name}}', variables: { name: 'x\ry' } }), 422, 'invalid_template_variables', /CR or LF/);
    assert.is((await preview({ subject: 'Hi {{name}}', text: '{{name}}', variables: { name: 'x\ty' } })).json().text, 'x\ty', 'line breaks and tabs are fine in text');
    expectError(await preview({ subject: '{{a}}', variables: { a: '' } }), 422, 'invalid_template_variables', /subject must be 1 to 998/);
    expectError(await preview({ subject: 'x{{a}}', variables: { a: 'y'.repeat(998) } }), 422, 'invalid_template_variables', /subject must be 1 to 998/);
    expectError(await preview({ subject: 'Hi {{name', variables: {} }), 400, 'validation_error', /body\.subject/);
    expectError(await preview({ subject: 's', html: '{{#each x}}{{/each}}' }), 400, 'validation_error', /body\.html/);
    expectError(await preview({ subject: 's', html: '<mjml><mj-body><mj-section><mj-column><mj-text>{{> p}}</mj-text></mj-column></mj-section></mj-body></mjml>' }), 400, 'validation_error', /^body\.html: line 1, column 48: partials are not supported$/);
    expectError(await preview({ subject: 's', extra: 1 }), 400, 'validation_error', /body\.extra/);
    assert.equal((await preview({ subject: 's'.repeat(998), html: null, text: 't'.repeat(1_000_000) })).json().subject, 's'.repeat(998));
    expectError(await preview({ subject: 's'.repeat(999) }), 400, 'validation_error', /body\.subject/);
    expectError(await preview({ subject: '' }), 400, 'validation_error', /body\.subject/);
    expectError(await preview({ subject: 'a\nb' }), 400, 'validation_error', /body\.subject/);
    expectError(await preview({ subject: 's', html: 'h'.repeat(1_000_001) }), 400, 'validation_error', /body\.html/);
    expectError(await preview({ subject: 's', text: 't'.repeat(1_000_001) }), 400, 'validation_error', /body\.text/);
    expectError(await preview({ html: 'x' }), 400, 'validation_error', /body\.subject/);
    assert.equal((await preview({ subject: 'only a subject' })).json(), { subject: 'only a subject', html: '', text: '' });
  });

  test.run();
}
