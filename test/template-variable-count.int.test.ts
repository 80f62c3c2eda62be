// A template uses at most 100 variables (spec limits table: "Template variables: up to 100
// properties", templates included): a send must give every variable its template uses and may
// give at most 100, so a template using more could never be sent. Its save (POST and PATCH) is
// refused with 400 naming the field where the count goes past 100, nothing stored; one of 100
// is saved and sent.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_VARIABLES } from '../domain/templates/variables.ts';
import { errorCode } from './support/management.ts';
import { createTemplateAs, sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('template variable count');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const names = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `v${from + i}`);
const uses = (list: string[]) => list.map((n) => `{{${n}}}`).join(' ');
const values = (list: string[]) => Object.fromEntries(list.map((n) => [n, 'x']));

function expectTooMany(response: { statusCode: number; body: string; json(): any }, field: string): void {
  assert.is(response.statusCode, 400, response.body);
  assert.is(errorCode(response as never), 'validation_error');
  assert.is(response.json().error.message, `${field}: the template uses ${MAX_VARIABLES + 1} variables, more than the ${MAX_VARIABLES} a send may give, so no send could render it`);
}

test(`a template of ${MAX_VARIABLES} variables is saved and sent; one of ${MAX_VARIABLES + 1} is refused at save, nothing stored`, async ({ w }) => {
  const hundred = names(0, MAX_VARIABLES);
  const saved = await createTemplateAs(w, { slug: 'hundred', subject: 'Hi', text: uses(hundred) });
  assert.is(saved.variables.length, MAX_VARIABLES);
  const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'hundred', variables: values(hundred) });
  assert.is(sent.statusCode, 202, sent.body);

  const refused = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'many', slug: 'many', subject: 'Hi', text: uses(names(0, MAX_VARIABLES + 1)) } });
  expectTooMany(refused, 'body.text');
  assert.is((await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'many' })).statusCode, 404, 'not stored');
});

test('counted over subject, html and text together: an edit past the limit is refused naming the field that passes it, the template left as it was', async ({ w }) => {
  const t = await createTemplateAs(w, { slug: 'edited', subject: 'Hi {{v0}}', html: '<p>{{v1}}</p>' });
  // 50 in the subject, 50 more in html (v0 again among them), then one more in html.
  const edit = { name: 'edited', slug: 'edited', subject: uses(names(0, 50)), html: `<p>${uses(names(0, MAX_VARIABLES + 1))}</p>`, revision: 1 };
  expectTooMany(await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: edit }), 'body.html');
  const kept = await templates(w.t, 'GET', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId });
  assert.is(kept.json().revision, 1);
  assert.equal(kept.json().variables, ['v0', 'v1']);
});

test.run();
