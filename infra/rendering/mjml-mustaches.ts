// The handlebars of an MJML template through MJML. MJML keeps text only inside its content
// elements (mj-text, mj-button, mj-raw, mj-title, …) and the attributes it writes out as
// written: text between elements is dropped, a CSS declaration holding `{{…}}` in an inlined
// <mj-style> too, and an mj-column's width is turned into numbers. So MJML compiles the source
// with each run of mustaches (statements with no text between them: `{{/if}}{{#if b}}` is one
// run) stood in for by a marker of its own, `{{relay_m<tag>_<n>}}`, which MJML keeps or drops
// where it would keep or drop the run; the compiled HTML gets the runs back, and a run whose
// marker is nowhere in it was lost, at a place of the source the author can be shown. Handlebars
// comments never reach MJML (each becomes its line breaks, so MJML's line numbers are the
// source's): a comment may hold markup that is no part of the document.
//
// The runs are found on the parsed source: every character of a template is literal text (a
// ContentStatement, whose location covers it as written, escapes and stripped whitespace
// included) or belongs to a mustache, a block's tags or a comment.
import { randomBytes } from 'node:crypto';
import type { TemplateNode } from '../../domain/templates/syntax.ts';

interface Span { start: number; end: number }

export interface MustacheRun {
  /** Where its first mustache (not a comment) is in the source: line from 1, column from 1. */
  line: number;
  column: number;
  /** That mustache as written, shortened for messages. */
  first: string;
  /** The run as written (comments included), on one line. */
  text: string;
  /** It opens, chains or closes a block: without it, the rest of the html would not parse. */
  block: boolean;
  /** It lies inside an HTML comment (`<!-- … -->`), which MJML drops: a {{variable}} there is meant to go. */
  inHtmlComment: boolean;
}

export interface MarkedMjml {
  /** The source as MJML should compile it: each run a marker, each comment its line breaks. */
  marked: string;
  runs: MustacheRun[];
  /** Compiled html with every marker written back as its run; `lost`: runs whose marker is nowhere in it, but for a {{variable}} in an HTML comment. */
  restore(html: string): { html: string; lost: MustacheRun[] };
  /** Text (an MJML message) with the markers it quotes written back as their runs. */
  unmark(text: string): string;
}

const LINE_BREAK = /\r\n?|\n/g;
const MAX_QUOTED = 80;

const quoted = (text: string): string => (text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED - 1)}…` : text);

/** The spans of literal text, mustaches and comments of a parsed template, each kind in source order. */
function spansOf(ast: TemplateNode, offsetOf: (at: { line: number; column: number }) => number) {
  const content: Span[] = [];
  const statements: Span[] = [];
  const spanOf = (node: TemplateNode): Span | null => {
    const loc = node.loc as { start: { line: number; column: number }; end: { line: number; column: number } } | null | undefined;
    return loc ? { start: offsetOf(loc.start), end: offsetOf(loc.end) } : null;
  };
  const walk = (node: TemplateNode | null | undefined): void => {
    for (const statement of (node?.body as TemplateNode[] | undefined) ?? []) {
      const span = spanOf(statement);
      if (statement.type === 'ContentStatement') {
        if (span) content.push(span);
      } else if (statement.type === 'MustacheStatement' || statement.type === 'CommentStatement') {
        if (span) statements.push(span);
      } else if (statement.type === 'BlockStatement') {
        walk(statement.program as TemplateNode);
        walk(statement.inverse as TemplateNode | null);
      }
    }
  };
  walk(ast);
  const byStart = (a: Span, b: Span) => a.start - b.start;
  return { content: content.sort(byStart), statements: statements.sort(byStart) };
}

/** Offsets where each line starts, lines broken as handlebars breaks them (CR LF, CR or LF). */
function lineStarts(source: string): number[] {
  const starts = [0];
  for (const found of source.matchAll(LINE_BREAK)) starts.push(found.index + found[0].length);
  return starts;
}

/** The ranges of HTML comments (each to its first `-->`) in markup. */
function htmlComments(markup: string): Span[] {
  const ranges: Span[] = [];
  for (let at = markup.indexOf('<!--'); at >= 0; at = markup.indexOf('<!--', at)) {
    const end = markup.indexOf('-->', at + 4);
    const stop = end < 0 ? markup.length : end + 3;
    ranges.push({ start: at, end: stop });
    at = stop;
  }
  return ranges;
}

/** Marks the runs of mustaches of an MJML source, parsed (and checked) as written. */
export function markMustaches(source: string, ast: TemplateNode): MarkedMjml {
  const starts = lineStarts(source);
  const offsetOf = (at: { line: number; column: number }) => (starts[at.line - 1] ?? source.length) + at.column;
  const positionOf = (offset: number) => {
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (starts[mid] <= offset) low = mid;
      else high = mid - 1;
    }
    return { line: low + 1, column: offset - starts[low] + 1 };
  };
  // A tag no text of the source holds (drawn again in the unlikely case it does).
  let tag: string;
  do tag = `relay_m${randomBytes(6).toString('hex')}_`;
  while (source.includes(tag));
  const markerOf = (index: number) => `{{${tag}${index}}}`;

  const { content, statements } = spansOf(ast, offsetOf);
  const gaps: Span[] = [];
  let cursor = 0;
  for (const span of content) {
    if (span.start > cursor) gaps.push({ start: cursor, end: span.start });
    cursor = Math.max(cursor, span.end);
  }
  if (cursor < source.length) gaps.push({ start: cursor, end: source.length });

  const runs: MustacheRun[] = [];
  /** Each run's text as written back into the compiled html. */
  const restored: string[] = [];
  /** Where each run's marker is in the marked source. */
  const markedAt: number[] = [];
  const parts: string[] = [];
  let copied = 0;
  let next = 0;
  let length = 0;
  const append = (text: string) => {
    parts.push(text);
    length += text.length;
  };
  for (const gap of gaps) {
    append(source.slice(copied, gap.start));
    copied = gap.end;
    while (next < statements.length && statements[next].end <= gap.start) next++;
    // Mustaches and comments in the gap; what they leave uncovered are a block's tags.
    let at = gap.start;
    let first: Span | null = null;
    let block = false;
    const tags = (end: number) => {
      if (source.slice(at, end).trim() === '') return;
      block = true;
      let start = at;
      while (/\s/.test(source[start])) start++;
      const close = source.indexOf('}}', start);
      first ??= { start, end: close < 0 || close + 2 > end ? end : close + 2 };
    };
    for (; next < statements.length && statements[next].start < gap.end; next++) {
      const statement = statements[next];
      if (statement.start > at) tags(statement.start);
      if (!source.startsWith('{{!', statement.start) && !source.startsWith('{{~!', statement.start)) first ??= statement;
      at = Math.max(at, statement.end);
    }
    if (at < gap.end) tags(gap.end);
    const text = source.slice(gap.start, gap.end);
    const breaks = text.match(LINE_BREAK)?.join('') ?? '';
    if (!first) {
      append(breaks);
      continue;
    }
    const position = positionOf(first.start);
    markedAt.push(length);
    append(markerOf(runs.length) + breaks);
    restored.push(text.replace(LINE_BREAK, ' '));
    runs.push({
      line: position.line,
      column: position.column,
      first: quoted(source.slice(first.start, first.end).replace(LINE_BREAK, ' ')),
      text: quoted(text.replace(LINE_BREAK, ' ')),
      block,
      inHtmlComment: false,
    });
  }
  append(source.slice(copied));
  const marked = parts.join('');
  const comments = htmlComments(marked);
  let comment = 0;
  for (let index = 0; index < runs.length; index++) {
    while (comment < comments.length && comments[comment].end <= markedAt[index]) comment++;
    runs[index].inHtmlComment = comment < comments.length && comments[comment].start < markedAt[index];
  }

  const markers = new RegExp(`\\{\\{${tag}(\\d+)\\}\\}`, 'g');
  return {
    marked,
    runs,
    restore(html) {
      const found = new Uint8Array(runs.length);
      const back = html.replace(markers, (marker, index: string) => {
        const i = Number(index);
        if (i >= runs.length) return marker;
        found[i] = 1;
        return restored[i];
      });
      const lost = runs.filter((run, i) => !found[i] && (run.block || !run.inHtmlComment));
      return { html: back, lost };
    },
    unmark(text) {
      return text.replace(markers, (marker, index: string) => runs[Number(index)]?.text ?? marker);
    },
  };
}
