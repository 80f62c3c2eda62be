// The rendering of a template's html whose elements nest deepest (domain/templates/deepest-rendering.ts):
// the branches of one block are alternatives, blocks one after the other add up, and which branch
// is deepest depends on what follows it. Templates parsed by the real parser.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { deepestRendering, depthSteps } from '../domain/templates/deepest-rendering.ts';
import { parseTemplate } from '../infra/rendering/handlebars-environment.ts';

const deepest = (source: string) => deepestRendering(parseTemplate(source, 'body.html'));

test('{{#if}}…{{else}}… deep on both branches: the depth of one branch, not of both nested', () => {
  assert.equal(deepest('{{#if a}}<div>{{else}}<div>{{/if}}'), { text: '<div>', depth: 1 });
  const n = 30_000;
  const found = deepest(`<p>{{v}}</p>{{#if a}}${'<div>'.repeat(n)}{{else}}${'<span>'.repeat(n)}x{{/if}}`);
  assert.is(found.depth, n);
  assert.is(found.text, `<p></p>${'<div>'.repeat(n)}`, 'on a tie, the first branch');
});

test('blocks one after the other add up, each branch chosen independently', () => {
  assert.equal(deepest('{{#if a}}<div>{{/if}}{{#if b}}<div>{{/if}}'), { text: '<div><div>', depth: 2 });
  assert.equal(deepest('{{#if a}}<div>{{else}}<p>x</p>{{/if}}{{#if b}}x{{else}}<span><span>{{/if}}'), { text: '<div><span><span>', depth: 3 });
});

test('which branch is deepest depends on what follows: a branch that rises high but closes loses to one that stays open before more elements', () => {
  const high = '<b><b><b><b><b></b></b></b></b></b>';
  const open = '<i><i><i>';
  assert.equal(deepest(`{{#if a}}${high}{{else}}${open}{{/if}}`), { text: high, depth: 5 });
  assert.equal(deepest(`{{#if a}}${high}{{else}}${open}{{/if}}<u><u><u><u>`), { text: `${open}<u><u><u><u>`, depth: 7 });
});

test('a branch left out can be the deeper rendering: one that closes elements opened before it', () => {
  // With every branch taken this measures 2: the <b> would sit one level deep, not three.
  assert.equal(deepest('<div><div>{{#if a}}</div></div>{{/if}}<b>'), { text: '<div><div><b>', depth: 3 });
});

test('{{else if}} chains, {{#unless}}…{{else}} and nested blocks: one branch each, nesting inside the branch taken', () => {
  assert.equal(deepest('{{#if a}}<i>{{else if b}}<i><i>{{else}}<i><i><i>{{/if}}'), { text: '<i><i><i>', depth: 3 });
  assert.equal(deepest('{{#unless a}}<i><i>{{else}}<i>{{/unless}}'), { text: '<i><i>', depth: 2 });
  assert.equal(deepest('{{#if a}}<div>{{#if b}}<div><div>{{else}}<div>{{/if}}{{else}}<span><span>{{/if}}'), { text: '<div><div><div>', depth: 3 });
});

test('values and comments add no elements; a tag cut by a {{variable}} counts once', () => {
  assert.equal(deepest('{{#if a}}{{v}}{{else}}<p>{{/if}}{{! <div> }}'), { text: '<p>', depth: 1 });
  assert.equal(deepest('<a href="{{url}}" title="{{t}}">go</a><b>'), { text: '<a href="" title="">go</a><b>', depth: 1 });
});

test('depthSteps: void elements rise one level for themselves; comments, doctypes and raw text hold no elements; a lone < is text', () => {
  assert.equal(depthSteps('<br><img src="x"><hr/>'), { peak: 1, net: 0 });
  assert.equal(depthSteps('<!doctype html><!-- <div><div> --><div>'), { peak: 1, net: 1 });
  assert.equal(depthSteps('<style>p > b { x: "<b><b>" }</style><b>'), { peak: 1, net: 1 });
  assert.equal(depthSteps('<SCRIPT>if (a<b) "<i>"</script>'), { peak: 1, net: 0 });
  assert.equal(depthSteps('a < b and 1<2, <3'), { peak: 0, net: 0 });
  assert.equal(depthSteps('<div><p></p></div></div>'), { peak: 2, net: -1 });
  assert.equal(depthSteps('<a href="'), { peak: 1, net: 1 });
  assert.equal(depthSteps('">x</a>'), { peak: 0, net: -1 });
});

test.run();
