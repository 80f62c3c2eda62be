// Whether html is an MJML document is decided by a forward scan (whitespace, an XML
// declaration, comments each to its first `-->`, then <mjml>), in time linear in what precedes
// the root: a regular expression over the comments backtracked exponentially, so a 531-character
// HTML template of 30 one-line comments and a paragraph outlasted the 2 s limit and its save was
// refused. Here that template is saved, and previewed as HTML; the same comments before <mjml>
// still make an MJML document.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('template MJML detection');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const comments = '<!-- section -->\n'.repeat(30);

test('a small HTML template that begins with 30 comments is saved and previewed as HTML', async ({ w }) => {
  const html = `${comments}<p>Hello {{name}}</p>`;
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'commented', slug: 'commented', subject: 'Hi', html } });
  assert.is(saved.statusCode, 201, saved.body);
  assert.equal(saved.json().variables, ['name']);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi', html, variables: { name: 'Ann' } } });
  assert.is(previewed.statusCode, 200, previewed.body);
  assert.is(previewed.json().html.trim(), '<p>Hello Ann</p>', 'sanitized (comments dropped), not compiled as MJML');
});

test('the same comments before <mjml> (after an XML declaration) make an MJML document', async ({ w }) => {
  const html = `<?xml version="1.0"?>\n${comments}<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{name}}</mj-text></mj-column></mj-section></mj-body></mjml>`;
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi', html, variables: { name: 'Ann' } } });
  assert.is(previewed.statusCode, 200, previewed.body);
  const rendered: string = previewed.json().html;
  assert.ok(rendered.startsWith('<!doctype html>'), 'compiled to a whole document');
  assert.match(rendered, /<div style="font-family:[^"]*">Hello Ann<\/div>/, 'the text as mj-text compiles it');
  assert.not.match(rendered, /<mj/);
});

test.run();
