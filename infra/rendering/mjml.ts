// MJML → responsive HTML. The template's {{variables}} pass through MJML as text and are
// merged afterwards, on the compiled HTML.
import mjml2html from 'mjml';
import { RelayError } from '../../domain/errors.ts';

const SPACE = /\s*/y;
const XML_DECLARATION = /<\?xml[^>]*\?>/iy;
const MJML_ROOT = /<mjml[\s>]/iy;

/** Where the run of whitespace at `from` ends. */
function afterSpace(html: string, from: number): number {
  SPACE.lastIndex = from;
  SPACE.test(html);
  return SPACE.lastIndex;
}

/**
 * An MJML document is one whose root element is <mjml> (an XML declaration or comments may come
 * first). Scanned forward, each comment ending at its first `-->`, so it takes time linear in
 * what precedes the root: a single regular expression over the comments backtracked
 * exponentially (a comment may end at any later `-->`), and 30 comments before a plain HTML
 * paragraph outlasted the template time limit.
 */
export function isMjmlDocument(html: string): boolean {
  let at = afterSpace(html, 0);
  XML_DECLARATION.lastIndex = at;
  if (XML_DECLARATION.test(html)) at = afterSpace(html, XML_DECLARATION.lastIndex);
  while (html.startsWith('<!--', at)) {
    const end = html.indexOf('-->', at + 4);
    if (end < 0) return false;
    at = afterSpace(html, end + 3);
  }
  MJML_ROOT.lastIndex = at;
  return MJML_ROOT.test(html);
}

export async function compileMjml(source: string, field: string): Promise<string> {
  let result: Awaited<ReturnType<typeof mjml2html>>;
  try {
    result = await mjml2html(source, {
      // mj-include would read files of the server: never.
      ignoreIncludes: true,
      // No .mjmlconfig lookup (it loads components from disk); no skeleton file.
      useMjmlConfigOptions: false,
      // Lenient: MJML's own rules are advice (an attribute holding {{variable}} fails them);
      // the output is sanitized anyway.
      validationLevel: 'soft',
      keepComments: false,
      minify: false,
      beautify: false,
    });
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new RelayError('validation_error', `${field}: MJML could not be compiled: ${message}`);
  }
  if (!result.html) throw new RelayError('validation_error', `${field}: MJML compiled to nothing`);
  return result.html;
}
