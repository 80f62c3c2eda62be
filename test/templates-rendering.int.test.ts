// Rendering never reaches the server's files: MJML's mj-include is ignored and no .mjmlconfig
// (which loads components from disk) is read, whatever the working directory holds.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkTemplateVariables } from '../domain/templates/variables.ts';
import { compileTemplate } from '../infra/rendering/template-renderer.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-mjml-'));
const cwd = process.cwd();

test.after(() => {
  process.chdir(cwd);
  rmSync(dir, { recursive: true, force: true });
});

test('mj-include of a file on the server is ignored, by absolute and by relative path', async () => {
  const secret = join(dir, 'secret.mjml');
  writeFileSync(secret, '<mj-section><mj-column><mj-text>TOP-SECRET-CONTENT</mj-text></mj-column></mj-section>');
  writeFileSync(join(dir, 'secret.css'), '.leak { color: red } /* TOP-SECRET-CSS */');
  process.chdir(dir);
  const t = await compileTemplate({
    subject: 's',
    html: `<mjml><mj-head><mj-include path="./secret.css" type="css" /></mj-head><mj-body>
      <mj-include path="${secret}" /><mj-include path="./secret.mjml" /><mj-include path="/etc/passwd" type="html" />
      <mj-section><mj-column><mj-text>{{name}}</mj-text></mj-column></mj-section></mj-body></mjml>`,
    text: null,
  });
  const html = t.render(checkTemplateVariables({ name: 'visible' })).html!;
  assert.match(html, /visible/);
  assert.not.match(html, /TOP-SECRET|root:/);
});

test('a .mjmlconfig in the working directory is not read and its components are not loaded', async () => {
  const marker = join(dir, 'component-was-loaded');
  writeFileSync(join(dir, 'evil-component.cjs'), `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'x'); module.exports = {};`);
  writeFileSync(join(dir, '.mjmlconfig'), JSON.stringify({ packages: ['./evil-component.cjs'], options: { keepComments: true } }));
  process.chdir(dir);
  const t = await compileTemplate({ subject: 's', html: '<mjml><mj-body><!-- kept only if the config were read --><mj-section><mj-column><mj-text>x</mj-text></mj-column></mj-section></mj-body></mjml>', text: null });
  t.render(checkTemplateVariables({}));
  assert.not.ok(existsSync(marker), 'no component module was required');
});

test.run();
