// An MJML template that MJML's own validator rejects is refused, not saved and sent with the
// invalid part missing: a designer who types `<mj-sectoin>` for `<mj-section>` (MJML drops the
// element and all it holds) or puts an mj-column straight in mj-body gets a 400
// validation_error at save and at preview naming body.html, MJML's line and its message
// ("Element mj-sectoin doesn't exist or is not registered"), never MJML's formattedMessage,
// which names the server's working directory. The one complaint let through is a type error on
// an attribute whose value holds `{{…}}` (`background-color="{{bg}}"` is no Color until it is
// rendered): such templates are saved and render with the value merged.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { errorCode } from './support/management.ts';
import { templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('MJML: invalid documents');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const misspelt = [
  '<mjml>',
  '  <mj-body>',
  '    <mj-sectoin>',
  '      <mj-column><mj-text>Your order {{order}} has shipped.</mj-text></mj-column>',
  '    </mj-sectoin>',
  '  </mj-body>',
  '</mjml>',
].join('\n');

test('an element MJML does not know is refused at save with the line and the validator\'s message', async ({ w }) => {
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'shipped', slug: 'shipped', subject: 'Shipped', html: misspelt } });
  assert.is(saved.statusCode, 400, `saved with the misspelt element (its content is lost from every send): ${saved.body.slice(0, 300)}`);
  assert.is(errorCode(saved), 'validation_error');
  const message: string = saved.json().error.message;
  assert.is(message, 'body.html: line 3: invalid MJML: Element mj-sectoin doesn\'t exist or is not registered');
  assert.not.ok(message.includes(process.cwd()), 'the server\'s directory is not shown');
});

test('a preview of it is refused the same way, not shown as an empty email', async ({ w }) => {
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', {
    as: w.owner, projectId: w.projectId, body: { subject: 'Shipped', html: misspelt, variables: { order: 'A-1' } },
  });
  assert.is(previewed.statusCode, 400, `previewed as: ${previewed.body.slice(0, 200)}… (contains "A-1": ${previewed.body.includes('A-1')})`);
  assert.match(previewed.json().error.message, /^body\.html: line 3: invalid MJML: Element mj-sectoin/);
});

test('an element where MJML does not allow it is refused at its line', async ({ w }) => {
  const html = '<mjml>\n<mj-body>\n<mj-column><mj-text>Hi {{name}}</mj-text></mj-column>\n</mj-body>\n</mjml>';
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'misplaced', slug: 'misplaced', subject: 'Hi', html } });
  assert.is(saved.statusCode, 400, saved.body);
  assert.match(saved.json().error.message, /^body\.html: line 3: invalid MJML: mj-column cannot be used inside mj-body, only inside: /);
});

test('attribute values holding {{variables}} are accepted, and the values are merged', async ({ w }) => {
  const html = [
    '<mjml><mj-body background-color="{{bg}}">',
    '<mj-section padding="{{pad}}"><mj-column><mj-text color="{{#if dark}}#ffffff{{else}}#000000{{/if}}">Hi</mj-text>',
    '<mj-button href="{{link}}" background-color="{{bg}}">Go</mj-button></mj-column></mj-section></mj-body></mjml>',
  ].join('\n');
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'themed', slug: 'themed', subject: 'Hi', html } });
  assert.is(saved.statusCode, 201, saved.body);
  assert.equal(saved.json().variables, ['bg', 'dark', 'link', 'pad']);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', {
    as: w.owner, projectId: w.projectId, body: { subject: 'Hi', html, variables: { bg: '#123456', pad: '4px', dark: true, link: 'https://acme.test/go' } },
  });
  assert.is(previewed.statusCode, 200, previewed.body);
  const rendered: string = previewed.json().html;
  for (const part of ['#123456', 'padding:4px', 'color:#ffffff', 'href="https://acme.test/go"']) assert.ok(rendered.includes(part), part);
  assert.not.ok(rendered.includes('#000000'));
});

test.run();
