// Where the dashboard's message view puts its <base target="_blank"> in a sender's HTML part
// (apps/api/plugins/project-emails.ts prologEnd): after white space, comments, <?…?> and the
// doctype, as the HTML parser's initial mode reads them. Checked against the regular expression
// that said it before (exact on inputs short enough for it) and on a prolog too long for any
// backtracking pattern.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { inertFrames, prologEnd } from '../apps/api/plugins/project-emails.ts';

const test = suite('the prolog of an HTML part');

const ORACLE = /^(?:\s|<!--(?:>|->|[\s\S]*?--!?>)|<\?[^>]*>)*(?:<!doctype[^>]*>)?/i;

const CASES = [
  '', '<p>x</p>', '   <p>x</p>', '\n\t<!doctype html><html>', '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0//EN">x',
  '<!-- a --><!doctype html>x', '<!-->x', '<!--->x', '<!---->x', '<!-- a --!>x', '<!-- a -- b -->x', '<!-- never ends',
  '<?xml version="1.0"?>\n<!doctype html>x', '<?xml never ends', '<!doctype never ends', '\u00a0\ufeff<!doctype html>x',
  '<!-- one --> <!-- two --!> <?x?> <!doctype html> <p>', '<!--a-->-->x', '<!doctype html><!-- after the doctype -->x',
  ' \u2028<!-- x -->\u3000<!DocType html >y',
];

test('given the prolog shapes, then it ends where the former regular expression said', () => {
  for (const html of CASES) assert.is(prologEnd(html), ORACLE.exec(html)![0].length, JSON.stringify(html));
});

test('given random prologs of those pieces, then the same', () => {
  const pieces = [' ', '\n', '<!--', '-->', '--!>', '<!-->', '<!--->', '<?', '>', '<!doctype', 'x', '<p>', '-', '!'];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % pieces.length;
  for (let i = 0; i < 5_000; i++) {
    const html = Array.from({ length: 1 + (i % 12) }, () => pieces[next()]).join('');
    assert.is(prologEnd(html), ORACLE.exec(html)![0].length, JSON.stringify(html));
  }
});

test('given 9 million spaces before the first element, then it ends after them (no stack to exhaust)', () => {
  const html = `${' '.repeat(9_000_000)}<p>Hello</p>`;
  assert.is(prologEnd(html), 9_000_000);
});

test('given 200,000 empty comments, then it ends after them, each comment\'s end found once', () => {
  const html = `${'<!---->'.repeat(100_000)}${'<!-- x --!>'.repeat(100_000)}<p>Hello</p>`;
  assert.is(prologEnd(html), html.length - '<p>Hello</p>'.length);
  assert.is(prologEnd(`${'<!---->'.repeat(50)}<!-- x --!><!doctype html>x`), ORACLE.exec(`${'<!---->'.repeat(50)}<!-- x --!><!doctype html>x`)![0].length);
});

test('given elements that load a document of their own, then they are renamed in any case; look-alikes are not', () => {
  assert.is(
    inertFrames('<IFRAME src="http://x/"></iframe><frameset><frame src=a></frameset><object data=b><embed src=c><portal src=d><iframe/>'),
    '<relay-inert-IFRAME src="http://x/"></relay-inert-iframe><relay-inert-frameset><relay-inert-frame src=a></relay-inert-frameset><relay-inert-object data=b><relay-inert-embed src=c><relay-inert-portal src=d><relay-inert-iframe/>',
  );
  assert.is(inertFrames('<iframes><frame-x><p>iframe</p><objection>'), '<iframes><frame-x><p>iframe</p><objection>');
});

test.run();
