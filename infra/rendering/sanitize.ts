// The sanitizer every rendered html passes through, previews and sends alike (sanitize-html).
// It keeps what email HTML needs, whole documents and MJML output included (head, <style>
// with media queries, tables, inline styles), and removes whatever can run code: <script>
// and other active elements, on* attributes, javascript:/vbscript:/data: URLs, CSS that
// executes (expression(), behavior, -moz-binding, javascript: in url()), meta refresh.
// Comments go too (MSO conditional comments included: Outlook falls back to the fluid layout).
import sanitizeHtml from 'sanitize-html';

const ALLOWED_TAGS = [
  // document
  'html', 'head', 'body', 'title', 'meta', 'style', 'link',
  // sections and text
  'div', 'span', 'p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'code',
  'a', 'b', 'strong', 'i', 'em', 'u', 's', 'strike', 'del', 'ins', 'small', 'big', 'sub', 'sup', 'mark', 'abbr', 'cite', 'q',
  'font', 'center', 'address', 'article', 'section', 'header', 'footer', 'main', 'nav', 'aside', 'figure', 'figcaption',
  'ul', 'ol', 'li', 'dl', 'dt', 'dd',
  // tables
  'table', 'thead', 'tbody', 'tfoot', 'tr', 'td', 'th', 'caption', 'colgroup', 'col',
  // media
  'img', 'picture', 'source',
];

const GLOBAL_ATTRIBUTES = [
  'style', 'class', 'id', 'dir', 'lang', 'title', 'role', 'align', 'valign', 'width', 'height', 'bgcolor', 'background',
  'border', 'color', 'face', 'size', 'aria-*',
];

const ALLOWED_ATTRIBUTES: Record<string, string[]> = {
  '*': GLOBAL_ATTRIBUTES,
  html: ['xmlns', 'xmlns:v', 'xmlns:o', 'lang', 'dir'],
  meta: ['name', 'content', 'http-equiv', 'charset'],
  style: ['type', 'media'],
  link: ['href', 'rel', 'type', 'media'],
  a: ['href', 'name', 'target', 'rel'],
  img: ['src', 'srcset', 'alt', 'width', 'height', 'border', 'usemap'],
  source: ['srcset', 'media', 'type'],
  table: ['cellpadding', 'cellspacing', 'summary', 'frame', 'rules'],
  td: ['colspan', 'rowspan', 'headers', 'scope', 'nowrap'],
  th: ['colspan', 'rowspan', 'headers', 'scope', 'nowrap'],
  col: ['span'],
  colgroup: ['span'],
  ol: ['start', 'type', 'reversed'],
  ul: ['type'],
  li: ['value'],
  font: ['color', 'face', 'size'],
  blockquote: ['cite'],
  q: ['cite'],
};

/** CSS that runs code in some client: IE expressions and behaviors, XBL bindings, script URLs. */
const EXECUTABLE_CSS = /expression\s*\(|behaviou?r\s*:|-moz-binding|javascript\s*:|vbscript\s*:|livescript\s*:/i;

/** CSS escapes (\6a, \j) and comments can spell any keyword; undone before looking. */
function cssAsRead(css: string): string {
  return css
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\\([0-9a-fA-F]{1,6})\s?/g, (_, hex: string) => String.fromCodePoint(Math.min(Number.parseInt(hex, 16), 0x10ffff) || 0xfffd))
    .replace(/\\(.)/g, '$1');
}

const isExecutableCss = (css: string): boolean => EXECUTABLE_CSS.test(cssAsRead(css));

const OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: ALLOWED_TAGS,
  allowedAttributes: ALLOWED_ATTRIBUTES,
  // <style> is needed for responsive layouts (media queries); its content is checked below.
  allowVulnerableTags: true,
  allowedSchemes: ['http', 'https', 'mailto', 'tel', 'cid'],
  allowedSchemesByTag: {},
  allowedSchemesAppliedToAttributes: ['href', 'src', 'cite', 'background', 'srcset'],
  allowProtocolRelative: true,
  disallowedTagsMode: 'discard',
  // Dropped with their content, not just their tags.
  nonTextTags: ['script', 'style', 'textarea', 'option', 'noscript', 'xmp', 'template', 'iframe', 'object', 'embed', 'svg', 'math'].filter((t) => !ALLOWED_TAGS.includes(t)),
  transformTags: {
    '*': (tagName, attribs) => {
      if (attribs.style !== undefined && isExecutableCss(attribs.style)) {
        const { style: _dropped, ...rest } = attribs;
        return { tagName, attribs: rest };
      }
      return { tagName, attribs };
    },
  },
  exclusiveFilter: (frame) =>
    (frame.tag === 'style' && isExecutableCss(frame.text)) ||
    (frame.tag === 'meta' && typeof frame.attribs['http-equiv'] === 'string' && frame.attribs['http-equiv'].trim().toLowerCase() === 'refresh') ||
    (frame.tag === 'link' && (frame.attribs.rel ?? '').trim().toLowerCase() !== 'stylesheet'),
};

const DOCTYPE = /^\s*<!doctype\s+html[^>]*>/i;

/**
 * How deep elements may nest in html to sanitize. The sanitizer's parser (htmlparser2) keeps
 * its open elements in an array it inserts into at the front, so each element opened costs the
 * depth at that point, and sanitizing grows with the square of the depth: 50,000 nested
 * elements take a few hundred ms, 80,000 one to two seconds, 200,000 unclosed <b> (600 KB)
 * about 10 s. Deeper than this, html could only run into the template time limit (2 s), holding
 * a template thread all along and then restarting it; it is refused at once instead, with a
 * message that says why. No email comes near (browsers stop nesting at 512).
 */
export const MAX_HTML_DEPTH = 50_000;

/** Thrown by sanitizeEmailHtml for html whose elements nest deeper than MAX_HTML_DEPTH. */
export class HtmlTooDeepError extends Error {
  constructor() {
    super(`elements nest more than ${MAX_HTML_DEPTH.toLocaleString('en-US')} deep`);
  }
}

/**
 * Sanitized email HTML; a document keeps its doctype (the parser drops it). Elements nested
 * deeper than MAX_HTML_DEPTH stop it there (HtmlTooDeepError), before that depth makes it slow:
 * counted on the sanitizer's own parse, as its parser sees the elements (implied and void
 * elements closed, stray end tags ignored).
 */
export function sanitizeEmailHtml(html: string): string {
  const doctype = DOCTYPE.exec(html)?.[0].trim();
  let depth = 0;
  const clean = sanitizeHtml(html, {
    ...OPTIONS,
    onOpenTag: () => {
      if (++depth > MAX_HTML_DEPTH) throw new HtmlTooDeepError();
    },
    onCloseTag: () => {
      depth--;
    },
  });
  return doctype ? `${doctype}\n${clean.trimStart()}` : clean;
}
