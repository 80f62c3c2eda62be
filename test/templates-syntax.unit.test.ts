// What a template may say and which variables it uses, from the parsed template; the
// TemplateVariables rules at their boundaries; slugs.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { isSlug, MAX_SLUG_LENGTH } from '../domain/templates/slug.ts';
import { analyzeTemplateAst, MAX_BLOCK_DEPTH, variablesOf } from '../domain/templates/syntax.ts';
import { checkTemplateVariables, requireVariables } from '../domain/templates/variables.ts';
import { checkRevision, templateContentOf } from '../domain/templates/content.ts';
import { parseTemplate } from '../infra/rendering/handlebars-environment.ts';
import { refusal } from './support/refusal.ts';

const analyze = (source: string, escapedOnly = true) => analyzeTemplateAst(parseTemplate(source, 'body.html'), { field: 'body.html', escapedOnly });


test('variables come from the AST: mustaches and block conditions, each once, in order of first use', () => {
  const a = analyze('<p>{{greeting}} {{name}}</p>{{#if vip}}{{name}} {{badge}}{{else if gold}}{{goldNote}}{{else}}–{{/if}}{{#unless optOut}}{{footer}}{{/unless}}');
  assert.equal(a.variables, ['greeting', 'name', 'vip', 'badge', 'gold', 'goldNote', 'optOut', 'footer']);
  assert.equal(a.outputs, { greeting: 1, name: 2, badge: 1, goldNote: 1, footer: 1 });
  assert.is(a.staticLength, '<p> </p> –'.length);
});

test('what only looks like a variable is not one: comments, raw text, escaped mustaches, attribute text', () => {
  const a = analyze('{{! {{hidden}} }}{{!-- {{alsoHidden}} --}}\\{{literal}} <a title="name">x</a> {{real}}');
  assert.equal(a.variables, ['real']);
});

test('a name regex would miss variables that the AST finds (whitespace, ~ stripping, else chains)', () => {
  const a = analyze('{{~ spaced ~}} {{#if  a  }}{{else if b}}{{/if}}{{^if c}}no{{/if}}');
  assert.equal(a.variables, ['spaced', 'a', 'b', 'c']);
});

test('variablesOf merges subject, html and text: each name once, sorted', () => {
  const subject = analyze('Hi {{name}}', false);
  const html = analyze('{{#if vip}}{{name}}{{/if}}');
  const text = analyze('{{zeta}} {{alpha}}', false);
  assert.equal(variablesOf([subject, html, null, text]), ['alpha', 'name', 'vip', 'zeta']);
  assert.equal(variablesOf([analyze('no variables')]), []);
});

test('refused constructs are 400 validation_error naming the field and the place', () => {
  const cases: Array<[string, RegExp]> = [
    ['{{#each items}}{{this}}{{/each}}', /\{\{#each\}\}/],
    ['{{#with user}}{{name}}{{/with}}', /\{\{#with\}\}/],
    ['{{#name}}section{{/name}}', /only \{\{#if\}\} and \{\{#unless\}\}/],
    ['{{^name}}inverse section{{/name}}', /only \{\{#if\}\}/],
    ['{{{{raw}}}} {{x}} {{{{/raw}}}}', /only \{\{#if\}\}/],
    ['{{lookup obj "constructor"}}', /helpers are not available/],
    ['{{log "x"}}', /helpers are not available/],
    ['{{name key=1}}', /helpers are not available/],
    ['{{#if (lookup a "b")}}x{{/if}}', /only variable names/],
    ['{{#if a b}}x{{/if}}', /exactly one variable/],
    ['{{#if}}x{{/if}}', /exactly one variable|requires/],
    ['{{#if "literal"}}x{{/if}}', /only variable names/],
    ['{{#if a as |b|}}{{b}}{{/if}}', /block parameters/],
    ['{{> partial}}', /partials/],
    ['{{#> layout}}x{{/layout}}', /partials/],
    ['{{#*inline "p"}}x{{/inline}}', /decorators/],
    ['{{*decorator}}', /decorators/],
    ['{{user.name}}', /flat values/],
    ['{{user/name}}', /flat values/],
    ['{{constructor.prototype}}', /flat values/],
    ['{{this}}', /does not name a variable/],
    ['{{.}}', /does not name a variable/],
    ['{{../up}}', /does not name a variable/],
    ['{{@index}}', /@-variables/],
    ['{{@root.x}}', /@-variables/],
    ['{{"text"}}', /only variable names/],
    ['{{42}}', /only variable names/],
    ['{{[weird name]}}', /not a valid variable name/],
    ['{{_underscore}}', /not a valid variable name/],
    ['{{if}}', /block helper/],
    ['{{unless}}', /block helper/],
  ];
  for (const [source, reason] of cases) {
    const error = refusal(() => analyze(source));
    assert.is(error.code, 'validation_error', source);
    assert.match(error.message, /^body\.html: /, source);
    assert.match(error.message, reason, `${source}: ${error.message}`);
  }
  assert.match(refusal(() => analyze('line one\n  {{a.b}}')).message, /line 2, column 5: \{\{a\.b\}\}/);
});

test('variable names: 64 characters is the longest a template may use', () => {
  assert.equal(analyze(`{{a${'b'.repeat(63)}}}`).variables, [`a${'b'.repeat(63)}`]);
  refusal(() => analyze(`{{a${'b'.repeat(64)}}}`));
});

test('html refuses unescaped output; text and subject are plain, so {{{x}}} is the same as {{x}} there', () => {
  assert.match(refusal(() => analyze('{{{raw}}}')).message, /HTML-escaped/);
  assert.match(refusal(() => analyze('{{& raw}}')).message, /HTML-escaped/);
  assert.equal(analyze('{{{raw}}} {{& other}}', false).variables, ['raw', 'other']);
});

test('template syntax errors are 400 naming the field, on one line', () => {
  for (const source of ['{{#if a}}', '{{x', '{{#if a}}{{/unless}}', '{{/if}}']) {
    const error = refusal(() => parseTemplate(source, 'body.text'));
    assert.is(error.code, 'validation_error');
    assert.match(error.message, /^body\.text: template syntax: /);
    assert.not.match(error.message, /\n/);
  }
});

test(`blocks nest at most ${MAX_BLOCK_DEPTH} deep, {{else if}} counting as a level: deeper is a 400 naming the field, the place and the limit, never a 500`, () => {
  const nested = (depth: number) => `${'{{#if a}}'.repeat(depth)}x${'{{/if}}'.repeat(depth)}`;
  assert.equal(analyze(nested(MAX_BLOCK_DEPTH)).variables, ['a']);
  assert.equal(analyze(`{{#if a}}${'{{else if b}}x'.repeat(MAX_BLOCK_DEPTH - 1)}{{/if}}`).variables, ['a', 'b']);
  assert.equal(analyze('{{#if a}}x{{/if}}'.repeat(500)).variables, ['a'], 'blocks side by side do not add up');
  const deeper = [
    nested(MAX_BLOCK_DEPTH + 1),
    // What handlebars' compiler overflows its stack on (and its parser takes seconds over).
    nested(2000),
    `{{#unless a}}${'{{#if b}}'.repeat(10)}{{#if c}}${'{{else if d}}x'.repeat(MAX_BLOCK_DEPTH)}{{/if}}${'{{/if}}'.repeat(10)}{{/unless}}`,
  ];
  for (const source of deeper) {
    const error = refusal(() => analyze(source));
    assert.is(error.code, 'validation_error');
    assert.match(error.message, /^body\.html: line 1, column \d+: blocks nest more than 32 deep/);
  }
  // Only real blocks count: not in comments or escaped.
  assert.equal(analyze(`{{!-- ${nested(100)} --}}\\{{#if x}}{{y}}`).variables, ['y']);
});

test('TemplateVariables: at most 100 properties', () => {
  const hundred = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`v${i}`, i]));
  assert.is(Object.keys(checkTemplateVariables(hundred)).length, 100);
  const error = refusal(() => checkTemplateVariables({ ...hundred, v100: 1 }));
  assert.is(error.code, 'invalid_template_variables');
  assert.match(error.message, /^body\.variables: at most 100/);
});

test('TemplateVariables: names match ^[A-Za-z][A-Za-z0-9_]{0,63}$', () => {
  for (const name of ['a', 'Z', 'a_b', 'abc123', `a${'b'.repeat(63)}`, 'constructor', 'toString']) {
    assert.ok(name in checkTemplateVariables({ [name]: 1 }), name);
  }
  for (const name of ['', '1a', '_a', 'a-b', 'a.b', 'a b', 'é', '__proto__', `a${'b'.repeat(64)}`]) {
    const error = refusal(() => checkTemplateVariables(JSON.parse(JSON.stringify({ [name]: 1 }))));
    assert.is(error.code, 'invalid_template_variables', name);
    assert.ok(error.message.startsWith(`body.variables.${name}:`), error.message);
  }
});

test('TemplateVariables: a string of at most 10,000 characters, a finite number or a boolean', () => {
  const ok = checkTemplateVariables({ s: 'x'.repeat(10_000), empty: '', n: -1.5, zero: 0, t: true, f: false });
  assert.equal({ ...ok }, { s: 'x'.repeat(10_000), empty: '', n: -1.5, zero: 0, t: true, f: false });
  assert.match(refusal(() => checkTemplateVariables({ s: 'x'.repeat(10_001) })).message, /^body\.variables\.s: strings are at most 10000/);
  for (const value of [null, undefined, { a: 1 }, [1], Number.NaN, Number.POSITIVE_INFINITY, 10n, () => 1]) {
    const error = refusal(() => checkTemplateVariables({ v: value }));
    assert.is(error.code, 'invalid_template_variables');
    assert.match(error.message, /^body\.variables\.v: /);
  }
});

test('TemplateVariables: absent means none; anything but an object is 422', () => {
  assert.equal(Object.keys(checkTemplateVariables(undefined)), []);
  for (const value of [null, [], 'a=1', 1, true]) {
    const error = refusal(() => checkTemplateVariables(value));
    assert.is(error.code, 'invalid_template_variables');
    assert.match(error.message, /^body\.variables: must be an object/);
  }
});

test('checked variables carry no prototype: only the names the request gave exist', () => {
  const values = checkTemplateVariables({ name: 'Ann' });
  assert.is(Object.getPrototypeOf(values), null);
  assert.not.ok('constructor' in values);
  assert.not.ok('toString' in values);
});

test('requireVariables names every used variable the request leaves out, the first in the field', () => {
  requireVariables(['a', 'b'], checkTemplateVariables({ a: 1, b: false, extra: 'x' }));
  const one = refusal(() => requireVariables(['a', 'b'], checkTemplateVariables({ a: 1 })));
  assert.is(one.code, 'invalid_template_variables');
  assert.is(one.message, 'body.variables.b: the template uses the variable b, which the request does not give');
  const two = refusal(() => requireVariables(['a', 'b', 'constructor'], checkTemplateVariables({ b: '' })));
  assert.match(two.message, /^body\.variables\.a: .*variables a, constructor/);
});

test('slugs: lowercase alphanumerics separated by single hyphens, at most 80 characters', () => {
  for (const slug of ['a', '0', 'welcome', 'order-shipped', 'a-1-b-2', 'x'.repeat(MAX_SLUG_LENGTH)]) assert.ok(isSlug(slug), slug);
  for (const slug of ['', 'A', 'Welcome', 'a--b', '-a', 'a-', 'a_b', 'a b', 'a.b', 'é', 'x'.repeat(MAX_SLUG_LENGTH + 1)]) assert.not.ok(isSlug(slug), slug);
});

test('content: html or text must be a nonempty string; left-out bodies become null', () => {
  assert.equal(templateContentOf({ name: 'n', slug: 's', subject: 'x', text: 't' }), { name: 'n', slug: 's', subject: 'x', html: null, text: 't' });
  for (const bodies of [{}, { html: null, text: null }, { html: '', text: '' }, { html: '' }]) {
    const error = refusal(() => templateContentOf({ name: 'n', slug: 's', subject: 'x', ...bodies }));
    assert.is(error.code, 'validation_error');
  }
});

test('revision check: only the current revision may be replaced', () => {
  checkRevision(3, 3);
  for (const requested of [2, 4, 1]) {
    const error = refusal(() => checkRevision(3, requested));
    assert.is(error.code, 'conflict');
    assert.match(error.message, new RegExp(`revision ${requested} is stale`));
  }
});

test.run();
