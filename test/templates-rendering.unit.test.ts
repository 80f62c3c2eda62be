// Rendering: values merged HTML-escaped in html and plain in text and subject, MJML checked as
// written (its handlebars, MJML's validator, no mustache dropped) and compiled before the merge,
// html sanitized after it, a locked handlebars environment, the size bound,
// the compiled-template cache and time-ordered template ids.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Handlebars from 'handlebars';
import { RelayError } from '../domain/errors.ts';
import { checkTemplateVariables } from '../domain/templates/variables.ts';
import { newTemplateId } from '../apps/services/templates/template-ids.ts';
import { CompiledTemplateCache } from '../infra/rendering/compiled-template-cache.ts';
import { compileParsed, parseTemplate } from '../infra/rendering/handlebars-environment.ts';
import { isMjmlDocument } from '../infra/rendering/mjml.ts';
import { sanitizeEmailHtml } from '../infra/rendering/sanitize.ts';
import { compileTemplate, MAX_RENDERED_BODY_LENGTH, type CompiledTemplate } from '../infra/rendering/template-renderer.ts';
import { refusal } from './support/refusal.ts';

const vars = (values: Record<string, unknown>) => checkTemplateVariables(values);

async function rejection(work: Promise<unknown>): Promise<RelayError> {
  try {
    await work;
  } catch (error) {
    assert.instance(error, RelayError);
    return error as RelayError;
  }
  assert.unreachable('expected a RelayError');
  throw new Error('unreachable');
}


test('values are HTML-escaped in html and written as they are in text and subject', async () => {
  const t = await compileTemplate({ subject: 'To {{who}}', html: '<p title="{{who}}">{{who}}</p>', text: 'To {{who}}' });
  const out = t.render(vars({ who: `<Ann & "Bob" 'C'>` }));
  assert.is(out.subject, `To <Ann & "Bob" 'C'>`);
  assert.is(out.text, `To <Ann & "Bob" 'C'>`);
  assert.is(out.html, '<p title="&lt;Ann &amp; &quot;Bob&quot; \'C\'&gt;">&lt;Ann &amp; "Bob" \'C\'&gt;</p>');
});

test('numbers and booleans render as text; if/unless follow truthiness', async () => {
  const t = await compileTemplate({ subject: '{{n}} {{b}}', html: null, text: '{{#if b}}yes{{else}}no{{/if}}/{{#unless n}}zero{{/unless}}' });
  assert.equal(t.render(vars({ n: 0, b: false })), { subject: '0 false', html: null, text: 'no/zero' });
  assert.equal(t.render(vars({ n: 2.5, b: true })), { subject: '2.5 true', html: null, text: 'yes/' });
});

test('a variable the template uses is required even inside a branch not taken; a missing one is named', async () => {
  const t = await compileTemplate({ subject: 's', html: null, text: '{{#if vip}}{{perk}}{{/if}}' });
  assert.equal(t.variables, ['perk', 'vip']);
  const error = refusal(() => t.render(vars({ vip: false })));
  assert.is(error.code, 'invalid_template_variables');
  assert.match(error.message, /^body\.variables\.perk: /);
  assert.is(t.render(vars({ vip: false, perk: 'x' })).text, '');
});

test('prototype members are never reached: {{constructor}} and {{toString}} are ordinary variables', async () => {
  const t = await compileTemplate({ subject: 's', html: '{{constructor}}|{{toString}}|{{hasOwnProperty}}', text: null });
  assert.equal(t.variables, ['constructor', 'hasOwnProperty', 'toString']);
  assert.match(refusal(() => t.render(vars({}))).message, /^body\.variables\.constructor: /);
  assert.is(t.render(vars({ constructor: 'c', toString: 't', hasOwnProperty: 'h' })).html, 'c|t|h');
});

test('the environment is private and locked: helpers registered globally do not exist here, built-ins other than if/unless are gone', () => {
  Handlebars.registerHelper('readFile', () => 'leaked');
  try {
    for (const source of ['{{readFile "x"}}', '{{lookup this "constructor"}}', '{{log "x"}}', '{{#each a}}x{{/each}}', '{{#with a}}x{{/with}}']) {
      const render = compileParsed(parseTemplate(source, 'f'), true);
      assert.throws(() => render({ a: 'v', x: 'v' }), /knownHelpersOnly|unknown helper|not defined|requires/i, source);
    }
  } finally {
    Handlebars.unregisterHelper('readFile');
  }
  const partial = compileParsed(parseTemplate('{{> p}}', 'f'), true);
  assert.throws(() => partial({}), /partial p could not be found/);
});

test('a rendered subject with CR or LF is 422 naming the variable that brought it; also an empty or too long one', async () => {
  const t = await compileTemplate({ subject: 'Re: {{topic}} {{ok}}', html: null, text: 't' });
  for (const topic of ['a\r\nBcc: x@y.test', 'a\nb', 'a\rb']) {
    const error = refusal(() => t.render(vars({ topic, ok: 'fine' })));
    assert.is(error.code, 'invalid_template_variables');
    assert.match(error.message, /^body\.variables\.topic: the rendered subject must not contain CR or LF$/);
  }
  const empty = await compileTemplate({ subject: '{{s}}', html: null, text: 't' });
  assert.match(refusal(() => empty.render(vars({ s: '' }))).message, /1 to 998 characters \(got 0\)/);
  assert.is(empty.render(vars({ s: 'x'.repeat(998) })).subject.length, 998);
  assert.match(refusal(() => empty.render(vars({ s: 'x'.repeat(999) }))).message, /\(got 999\)/);
});

test('a rendering that would exceed 2,000,000 characters is refused before it is built', async () => {
  // 200 uses of a 10,000-character value = 2,000,000 characters: the most allowed.
  const source = '{{v}}'.repeat(200);
  const t = await compileTemplate({ subject: 's', html: null, text: source });
  assert.is(t.render(vars({ v: 'x'.repeat(10_000) })).text!.length, MAX_RENDERED_BODY_LENGTH);
  const plus = await compileTemplate({ subject: 's', html: null, text: `${source}!` });
  assert.match(refusal(() => plus.render(vars({ v: 'x'.repeat(10_000) }))).message, /^body\.variables\.v: the rendered text would exceed 2,000,000/);
  // In html an escaped value is longer: 200 uses of 2,000 '&' are 5 characters each.
  const html = await compileTemplate({ subject: 's', html: source, text: null });
  assert.ok(html.render(vars({ v: '&'.repeat(2000) })).html!.length > 0);
  assert.match(refusal(() => html.render(vars({ v: '&'.repeat(2001) }))).message, /rendered html would exceed/);
  // The case that took 2.5 s per send: an 18 KB template whose entity-heavy values came to 9 MB.
  const heavy = await compileTemplate({ subject: 's', html: '<p>{{a}}</p>'.repeat(1500), text: null });
  assert.match(refusal(() => heavy.render(vars({ a: '<&>"\''.repeat(240) }))).message, /^body\.variables\.a: the rendered html would exceed 2,000,000 characters/);
});

test('comments render nothing and are not kept: whitespace control and standalone lines as handlebars has them, text around them joined, none counted in the estimate of what the template keeps', async () => {
  const source = 'a{{! one }}b {{~! strip ~}}  c\n  {{!-- standalone --}}\nd{{#if x}}e{{! in a block }}f{{else}}g{{!}}h{{/if}}{{v}}{{!}}i';
  const values = vars({ x: true, v: '<v>' });
  const compiled = await compileTemplate({ subject: 's{{! s }}', html: null, text: source });
  const expected = Handlebars.compile(source, { noEscape: true })({ x: true, v: '<v>' });
  assert.is(compiled.render(values).text, expected);
  assert.is(expected, 'abc\nde' + 'f<v>i');
  assert.is(compiled.render(vars({ x: false, v: '' })).text, 'abc\ndghi');
  // Only the comments' characters count (their nodes are dropped: 199,000 `{{!}}` kept about 50 MB of them).
  const commented = await compileTemplate({ subject: 's', html: `${'a{{!}}'.repeat(1_000)}x`, text: null });
  const plain = await compileTemplate({ subject: 's', html: `${'a'.repeat(1_000)}x`, text: null });
  assert.is(commented.render(vars({})).html, plain.render(vars({})).html);
  assert.ok(commented.estimatedBytes - plain.estimatedBytes === 5 * 5_000, `${commented.estimatedBytes} against ${plain.estimatedBytes}: the comments' characters only`);
});

test('sanitizer: no script, no event handlers, no javascript: URLs in any spelling', () => {
  const dirty = [
    '<script>alert(1)</script>',
    '<SCRIPT SRC=//x.test/a.js></SCRIPT>',
    '<img src=x onerror=alert(1)>',
    '<body onload="alert(1)">',
    '<a href="javascript:alert(1)">a</a>',
    '<a href="JaVaScRiPt:alert(1)">b</a>',
    '<a href="jav&#x09;ascript:alert(1)">c</a>',
    '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">d</a>',
    '<a href=" javascript:alert(1)">e</a>',
    '<a href="vbscript:msgbox(1)">f</a>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">g</a>',
    '<iframe src="javascript:alert(1)"></iframe>',
    '<svg><script>alert(1)</script></svg>',
    '<svg onload=alert(1)>',
    '<math><mtext><script>alert(1)</script></mtext></math>',
    '<object data="javascript:alert(1)"></object><embed src="x.swf">',
    '<form action="javascript:alert(1)"><input type=submit></form>',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    '<link rel="import" href="https://x.test/evil.html">',
    '<base href="javascript:alert(1)//">',
    '<div style="background:url(javascript:alert(1))">h</div>',
    '<div style="width:expression(alert(1))">i</div>',
    '<div style="background:url(\\6a avascript:alert(1))">j</div>',
    '<style>body{background:url("javascript:alert(1)")}</style>',
    '<style>p{behavior:url(x.htc)}</style>',
    '<style>p{-moz-binding:url(x.xml#xss)}</style>',
    '<style>p{width:exp/**/ression(alert(1))}</style>',
    '<!--[if gte mso 9]><script>alert(1)</script><![endif]-->',
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
    '<template><script>alert(1)</script></template>',
  ].join('\n');
  const clean = sanitizeEmailHtml(dirty);
  assert.not.match(clean, /<script/i);
  assert.not.match(clean, /\son[a-z]+\s*=/i);
  assert.not.match(clean, /javascript|vbscript|data:text/i);
  assert.not.match(clean, /expression|behavior|binding/i);
  assert.not.match(clean, /<(iframe|svg|math|object|embed|form|input|base|template|noscript)\b/i);
  assert.not.match(clean, /http-equiv="refresh"/i);
  assert.not.match(clean, /rel="import"/i);
  assert.not.match(clean, /alert\(1\)">/);
});

test('sanitizer: keeps what email HTML needs', () => {
  const html = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>T</title>
<style type="text/css">@media only screen and (max-width:480px){.col{width:100%!important}}</style>
<link href="https://fonts.example.test/css" rel="stylesheet" type="text/css"></head>
<body><table role="presentation" width="600" cellpadding="0" cellspacing="0" border="0" align="center" bgcolor="#ffffff"><tr><td class="col" valign="top" style="padding:10px;color:#333">
<a href="https://example.test/x?a=1&amp;b=2" target="_blank">link</a> <a href="mailto:a@example.test">mail</a> <a href="tel:+100">tel</a>
<img src="https://cdn.example.test/logo.png" alt="Logo" width="120" height="40"> <img src="cid:logo@relay">
<h1>Title</h1><ul><li>one</li></ul><strong>b</strong> <em>i</em> <span style="font-size:12px">s</span></td></tr></table></body></html>`;
  const clean = sanitizeEmailHtml(html);
  assert.match(clean, /^<!DOCTYPE html>\n<html lang="en">/);
  for (const kept of [
    '<meta charset="utf-8" />', '<meta name="viewport" content="width=device-width" />', '<title>T</title>',
    '@media only screen and (max-width:480px){.col{width:100%!important}}',
    '<link href="https://fonts.example.test/css" rel="stylesheet" type="text/css" />',
    '<table role="presentation" width="600" cellpadding="0" cellspacing="0" border="0" align="center" bgcolor="#ffffff">',
    '<td class="col" valign="top" style="padding:10px;color:#333">',
    '<a href="https://example.test/x?a=1&amp;b=2" target="_blank">link</a>',
    '<a href="mailto:a@example.test">mail</a>', '<a href="tel:+100">tel</a>',
    '<img src="https://cdn.example.test/logo.png" alt="Logo" width="120" height="40" />', '<img src="cid:logo@relay" />',
    '<h1>Title</h1>', '<li>one</li>', '<span style="font-size:12px">s</span>',
  ]) assert.ok(clean.includes(kept), `kept: ${kept}\n${clean}`);
});

test('MJML documents are recognised by their root element', () => {
  for (const html of ['<mjml><mj-body></mj-body></mjml>', '  \n<mjml lang="en">', '<?xml version="1.0"?>\n<mjml>', '<!-- c --><mjml>', '<MJML>']) assert.ok(isMjmlDocument(html), html);
  for (const html of ['<html><body><mjml></mjml></body></html>', '<p>mjml</p>', '<mjmlx>', 'mjml']) assert.not.ok(isMjmlDocument(html), html);
});

test('MJML documents may begin with handlebars comments, which render to nothing', () => {
  for (const html of [
    '{{!-- Welcome, v2 --}}\n<mjml>', '{{! owner: growth }}<mjml>', '{{~!-- a }} b --~}}  <mjml>', '<!-- a -->\n{{! b }}\n{{!-- c --}}<mjml>',
    '<?xml version="1.0"?>{{!-- x --}}<mjml>', '{{!----}}<mjml>',
  ]) assert.ok(isMjmlDocument(html), html);
  for (const html of ['{{!-- unclosed <mjml>', '{{! unclosed <mjml>', '{{name}}<mjml>', '{{!-- c --}}<p>x</p>', '{{#if a}}<mjml>', '{{!-- a }} <mjml> --}}<p>']) {
    assert.not.ok(isMjmlDocument(html), html);
  }
});

test('MJML: compiled to responsive HTML first, then merged, then sanitized; variables found in what MJML produces', async () => {
  const t = await compileTemplate({
    subject: '{{subject}}',
    html: `<mjml><mj-head><mj-title>{{title}}</mj-title></mj-head><mj-body>
      <mj-section><mj-column><mj-text>Hello {{name}}</mj-text><mj-button href="{{url}}">Go</mj-button></mj-column>
      <mj-column><mj-raw><script>alert(1)</script></mj-raw><mj-text><a href="#" onclick="x()">{{#if vip}}VIP{{/if}}</a></mj-text></mj-column></mj-section>
    </mj-body></mjml>`,
    text: null,
  });
  assert.ok(t.mjml);
  assert.equal(t.variables, ['name', 'subject', 'title', 'url', 'vip']);
  const out = t.render(vars({ subject: 'S', title: 'T<1>', name: 'Ann & Bob', url: 'https://example.test/?a=1&b=2', vip: true }));
  assert.match(out.html!, /^<!doctype html>/i);
  assert.match(out.html!, /@media only screen and \(min-width:480px\)/);
  assert.match(out.html!, /class="mj-column-per-50 mj-outlook-group-fix"/);
  assert.match(out.html!, /Hello Ann &amp; Bob/);
  assert.match(out.html!, /<title>T&lt;1&gt;<\/title>/);
  assert.match(out.html!, /href="https:\/\/example\.test\/\?a=1&amp;b=2"/);
  assert.match(out.html!, /<a href="#">VIP<\/a>/);
  assert.not.match(out.html!, /<script|onclick|\{\{/i);
});

test('MJML: a {{variable}} in an HTML comment goes with it; handlebars errors are at the line and column of the MJML as written', async () => {
  const dropped = await compileTemplate({ subject: 's', html: '<mjml><mj-body><!-- {{lost}} --><mj-section><mj-column><mj-text>{{kept}}</mj-text></mj-column></mj-section></mj-body></mjml>', text: null });
  assert.equal(dropped.variables, ['kept'], 'MJML drops comments, so {{lost}} is never rendered');
  const error = await rejection(compileTemplate({ subject: 's', html: '<mjml><mj-body><mj-section><mj-column>\n<mj-text>{{#each xs}}{{/each}}</mj-text></mj-column></mj-section></mj-body></mjml>', text: null }));
  assert.is(error.code, 'validation_error');
  assert.match(error.message, /^body\.html: line 2, column 10: only \{\{#if\}\}/);
  const block = await rejection(compileTemplate({ subject: 's', html: '<mjml><mj-body><!-- {{#if a}} --><mj-section><mj-column><mj-text>x{{/if}}</mj-text></mj-column></mj-section></mj-body></mjml>', text: null }));
  assert.match(block.message, /^body\.html: line 1, column 21: \{\{#if a\}\} would be lost: /, 'a block tag in an HTML comment is lost, unlike its end');
});

test('MJML: a mustache MJML would drop is refused where the author wrote it; in an MJML content element or <mj-raw> it is kept', async () => {
  const section = '<mj-section><mj-column><mj-text>VIP</mj-text></mj-column></mj-section>';
  const around = `<mjml><mj-body>\n  {{#if vip}}${section}{{/if}}\n</mj-body></mjml>`;
  const error = await rejection(compileTemplate({ subject: 's', html: around, text: null }));
  assert.is(error.code, 'validation_error');
  assert.match(error.message, /^body\.html: line 2, column 3: \{\{#if vip\}\} would be lost: .*put it inside an MJML content element or <mj-raw>$/);
  const inlined = await rejection(compileTemplate({
    subject: 's', text: null,
    html: '<mjml><mj-head>\n<mj-style inline="inline">.b { color: {{brand}}; }</mj-style></mj-head><mj-body><mj-section><mj-column><mj-text css-class="b">x</mj-text></mj-column></mj-section></mj-body></mjml>',
  }));
  assert.match(inlined.message, /^body\.html: line 2, column 39: \{\{brand\}\} would be lost/);

  const raw = await compileTemplate({ subject: 's', html: `<mjml><mj-body><mj-raw>{{#if vip}}</mj-raw>${section}<mj-raw>{{/if}}</mj-raw></mj-body></mjml>`, text: null });
  assert.equal(raw.variables, ['vip']);
  assert.match(raw.render(vars({ vip: true })).html!, />VIP</);
  assert.not.match(raw.render(vars({ vip: false })).html!, />VIP</);
  // Handlebars comments never reach MJML: markup in one is no part of the document.
  const commented = await compileTemplate({ subject: 's', html: `{{!-- v2 --}}\n<mjml><mj-body>{{!-- ${section} --}}<mj-section><mj-column><mj-text>{{name}}</mj-text></mj-column></mj-section></mj-body></mjml>`, text: null });
  assert.ok(commented.mjml);
  assert.equal(commented.variables, ['name']);
  assert.not.match(commented.render(vars({ name: 'Ann' })).html!, />VIP</);
});

test('MJML: what MJML\'s validator refuses is a 400 at its line, but a type error on an attribute holding {{', async () => {
  const error = await rejection(compileTemplate({ subject: 's', text: null, html: '<mjml>\n<mj-body>\n<mj-column><mj-text>{{x}}</mj-text></mj-column>\n<mj-sectoin></mj-sectoin></mj-body></mjml>' }));
  assert.is(error.code, 'validation_error');
  assert.is(error.message, 'body.html: line 3: invalid MJML: mj-column cannot be used inside mj-body, only inside: mj-attributes, mj-group, mj-section (and 1 more problem MJML reports)');
  const illegal = await rejection(compileTemplate({ subject: 's', text: null, html: '<mjml><mj-body><mj-section><mj-column><mj-text padding="{{#if a}}x" title="y{{/if}}">z</mj-text></mj-column></mj-section></mj-body></mjml>' }));
  assert.match(illegal.message, /^body\.html: line 1: invalid MJML: Attribute title is illegal$/);
  const typed = await compileTemplate({
    subject: 's', text: null,
    html: '<mjml><mj-body background-color="{{bg}}"><mj-section><mj-column background-color="{{#if wide}}#ffffff{{else}}#eeeeee{{/if}}"><mj-text color="{{fg}}">x</mj-text></mj-column></mj-section></mj-body></mjml>',
  });
  assert.equal(typed.variables, ['bg', 'fg', 'wide']);
  const rendered = typed.render(vars({ bg: '#123456', fg: 'red', wide: false })).html!;
  for (const value of ['#123456', 'color:red', '#eeeeee']) assert.ok(rendered.includes(value), value);
  assert.not.ok(rendered.includes('#ffffff'));
  // MJML computes a column's width from the attribute and writes out no part of it as written.
  const width = await rejection(compileTemplate({ subject: 's', text: null, html: '<mjml><mj-body><mj-section><mj-column width="{{w}}"><mj-text>x</mj-text></mj-column></mj-section></mj-body></mjml>' }));
  assert.match(width.message, /^body\.html: line 1, column 46: \{\{w\}\} would be lost/);
});

test('a stored MJML template renders as it did when it was saved: the checks of a save are not applied to a send', async () => {
  const section = '<mj-section><mj-column><mj-text>VIP {{name}}</mj-text></mj-column></mj-section>';
  for (const html of [
    `<mjml><mj-body>{{#if vip}}${section}{{/if}}</mj-body></mjml>`,
    `<mjml><mj-body><mj-sectoin>${section}</mj-sectoin>${section}</mj-body></mjml>`,
    // Its source does not parse as handlebars on its own (MJML drops the unclosed block).
    `<mjml><mj-body><mj-section><mj-column>{{#if vip}}<mj-text>VIP {{name}}</mj-text></mj-column></mj-section></mj-body></mjml>`,
  ]) {
    await rejection(compileTemplate({ subject: 's', html, text: null }));
    const stored = await compileTemplate({ subject: 's', html, text: null }, 'template', 'stored');
    assert.equal(stored.variables, ['name'], html);
    assert.match(stored.render(vars({ name: 'Ann' })).html!, /VIP Ann/, html);
  }
});

test('compiled-template cache: one compilation per (id, revision), a new revision compiles again, bounded, failures not kept', async () => {
  const cache = new CompiledTemplateCache(2);
  let compilations = 0;
  const compile = (text: string) => async (): Promise<CompiledTemplate> => {
    compilations++;
    return compileTemplate({ subject: 's', html: null, text });
  };
  const [a, b] = await Promise.all([cache.get('tpl_a', 1, compile('one')), cache.get('tpl_a', 1, compile('never'))]);
  assert.is(a, b, 'concurrent misses share one compilation');
  assert.is(compilations, 1);
  assert.is((await cache.get('tpl_a', 1, compile('never'))).render(vars({})).text, 'one');
  assert.is((await cache.get('tpl_a', 2, compile('two'))).render(vars({})).text, 'two');
  assert.is(compilations, 2);
  assert.is(cache.hits, 2);
  assert.is(cache.misses, 2);
  // Full at 2 entries: using a@1 makes a@2 the least recently used, so b@1 pushes a@2 out.
  await cache.get('tpl_a', 1, compile('never'));
  await cache.get('tpl_b', 1, compile('b'));
  assert.is(cache.size, 2);
  assert.ok(cache.has('tpl_a', 1));
  assert.ok(cache.has('tpl_b', 1));
  assert.not.ok(cache.has('tpl_a', 2));
  await rejection(cache.get('tpl_c', 1, async () => compileTemplate({ subject: '{{bad', html: null, text: 't' })));
  assert.not.ok(cache.has('tpl_c', 1), 'a failed compilation is not kept');
  assert.throws(() => new CompiledTemplateCache(0));
});

test('template ids sort by creation time, also within one millisecond and when the clock steps back', () => {
  const at = new Date('2026-05-01T10:00:00.000Z');
  const ids = [
    newTemplateId(at), newTemplateId(at), newTemplateId(at),
    newTemplateId(new Date(at.getTime() + 1)),
    newTemplateId(new Date(at.getTime() - 5000)),
    newTemplateId(new Date(at.getTime() + 60_000)),
  ];
  assert.equal([...ids].sort(), ids);
  assert.is(new Set(ids).size, ids.length);
  for (const id of ids) assert.match(id, /^tpl_[0-9a-z]{26}$/);
});

test.run();
