// Which rendering of a template's html nests its elements deepest, so that a save refuses html
// too deep for a send to sanitize, and not html that is deep only with the branches of a block
// nested in each other. A rendering takes one branch of each {{#if}} / {{#unless}} ({{else}} and
// each {{else if}} are alternatives) and every block after another, and values add no elements
// (they are escaped), so a rendering's elements are those of the literal text on its path.
//
// Depth here is a model (an opening tag one level more, a closing tag one less, a void element a
// level for itself only) used to choose the path; the sanitizer's parser then measures that
// path's text as it measures a send's, so a refusal is always the parser's verdict on a path.
// Where the two differ (end tags the parser implies or ignores) another path may be the parser's
// deepest; a send taking it is still refused at its own sanitizing. Choosing is linear: a stretch
// of text is summed up by how far it rises (peak) and where it ends (net), and the highest a path
// can reach from some point on is the most of max(peak, net + what the rest can reach), decided
// from the end.
//
// Blocks are treated as independent: two blocks on the same variable may be combined on branches
// no values take together, so such a path can be deeper than any send's.
import type { TemplateNode } from './syntax.ts';

/** How a stretch of html moves element depth: the highest it reaches and where it ends, from its start. */
export interface DepthSteps {
  peak: number;
  net: number;
}

/** Elements with no content: the parser opens and closes them at once. */
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'keygen', 'link', 'meta', 'param', 'source', 'track', 'wbr']);
/** Elements whose content the parser reads as text up to their closing tag. */
const RAW_TEXT = new Set(['script', 'style', 'textarea', 'title']);

const TAG = /<(\/?)([a-zA-Z][^\s/>]*)/y;

/**
 * The depth steps of a stretch of html (a ContentStatement's text, which may begin or end in
 * the middle of a tag cut by a {{variable}}): a tag counts where its name is.
 */
export function depthSteps(html: string): DepthSteps {
  let depth = 0;
  let peak = 0;
  let at = 0;
  while (at < html.length) {
    const lt = html.indexOf('<', at);
    if (lt < 0) break;
    if (html.startsWith('<!--', lt)) {
      const end = html.indexOf('-->', lt + 4);
      if (end < 0) break;
      at = end + 3;
      continue;
    }
    if (html[lt + 1] === '!' || html[lt + 1] === '?') {
      const end = html.indexOf('>', lt);
      if (end < 0) break;
      at = end + 1;
      continue;
    }
    TAG.lastIndex = lt;
    const tag = TAG.exec(html);
    if (!tag) {
      at = lt + 1;
      continue;
    }
    const name = tag[2].toLowerCase();
    const end = html.indexOf('>', TAG.lastIndex);
    at = end < 0 ? html.length : end + 1;
    if (tag[1]) {
      depth--;
      continue;
    }
    peak = Math.max(peak, depth + 1);
    if (VOID.has(name)) continue;
    depth++;
    if (RAW_TEXT.has(name)) {
      const closing = new RegExp(`</${name}`, 'gi');
      closing.lastIndex = at;
      const found = closing.exec(html);
      if (!found) break;
      at = found.index;
    }
  }
  return { peak, net: depth };
}

interface Chosen {
  /** The highest the path reaches from its start, what follows it included. */
  reach: number;
  /** Its literal text, last part first. */
  reversed: string[];
}

/** The deepest path through `body` followed by text reaching `after` from where `body` ends. */
function deepest(body: TemplateNode[], after: number): Chosen {
  let reach = after;
  const reversed: string[] = [];
  for (let i = body.length - 1; i >= 0; i--) {
    const node = body[i];
    if (node.type === 'ContentStatement') {
      const text = node.value as string;
      const steps = depthSteps(text);
      reach = Math.max(steps.peak, steps.net + reach);
      reversed.push(text);
    } else if (node.type === 'BlockStatement') {
      // Without {{else}} the other alternative is nothing; on a tie the first branch is kept.
      const first = deepest(((node.program as TemplateNode | null)?.body as TemplateNode[] | undefined) ?? [], reach);
      const second = deepest(((node.inverse as TemplateNode | null)?.body as TemplateNode[] | undefined) ?? [], reach);
      const chosen = second.reach > first.reach ? second : first;
      reach = chosen.reach;
      for (const part of chosen.reversed) reversed.push(part);
    }
    // {{variable}}: no elements (values are escaped); comments: nothing.
  }
  return { reach, reversed };
}

/**
 * The literal text (every value empty) of the rendering of a parsed template whose elements
 * nest deepest by depthSteps, with that depth: one branch of each block, the deepest for what
 * follows it.
 */
export function deepestRendering(ast: TemplateNode): { text: string; depth: number } {
  const { reach, reversed } = deepest((ast.body as TemplateNode[] | undefined) ?? [], 0);
  return { text: reversed.reverse().join(''), depth: reach };
}
