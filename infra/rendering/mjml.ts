// MJML → responsive HTML. The handlebars of an MJML template is parsed and checked on the source
// as written (./template-renderer.ts); MJML compiles it with each run of mustaches stood in for
// by a marker (./mjml-mustaches.ts), and the variables are merged afterwards, on the compiled HTML.
import mjml2html from 'mjml';
import { RelayError } from '../../domain/errors.ts';

const SPACE = /\s*/y;
const XML_DECLARATION = /<\?xml[^>]*\?>/iy;
const MJML_ROOT = /<mjml[\s>]/iy;
/** Where a long handlebars comment (`{{!-- … --}}`) ends, as handlebars' lexer finds it: its first `--}}` (or `--~}}`). */
const LONG_COMMENT_END = /--~?\}\}/g;
const LONG_COMMENT = /\{\{~?!--/y;
const SHORT_COMMENT = /\{\{~?!/y;

/** Where the run of whitespace at `from` ends. */
function afterSpace(html: string, from: number): number {
  SPACE.lastIndex = from;
  SPACE.test(html);
  return SPACE.lastIndex;
}

/** Where the comment at `at` (HTML, or handlebars: rendered to nothing) ends: null when none starts there, -1 when it is never closed. */
function commentEnd(html: string, at: number): number | null {
  if (html.startsWith('<!--', at)) {
    const end = html.indexOf('-->', at + 4);
    return end < 0 ? -1 : end + 3;
  }
  LONG_COMMENT.lastIndex = at;
  if (LONG_COMMENT.test(html)) {
    LONG_COMMENT_END.lastIndex = LONG_COMMENT.lastIndex;
    const end = LONG_COMMENT_END.exec(html);
    return end ? end.index + end[0].length : -1;
  }
  SHORT_COMMENT.lastIndex = at;
  if (SHORT_COMMENT.test(html)) {
    const end = html.indexOf('}}', SHORT_COMMENT.lastIndex);
    return end < 0 ? -1 : end + 2;
  }
  return null;
}

/**
 * An MJML document is one whose root element is <mjml> (an XML declaration, HTML comments and
 * handlebars comments, `{{!-- … --}}` or `{{! … }}`, may come first). Scanned forward, each
 * comment ending at its first end, as HTML and handlebars end them, so it takes time linear in
 * what precedes the root: a single regular expression over the comments backtracked
 * exponentially (a comment may end at any later `-->`), and 30 comments before a plain HTML
 * paragraph outlasted the template time limit.
 */
export function isMjmlDocument(html: string): boolean {
  let at = afterSpace(html, 0);
  XML_DECLARATION.lastIndex = at;
  if (XML_DECLARATION.test(html)) at = afterSpace(html, XML_DECLARATION.lastIndex);
  for (let end = commentEnd(html, at); end !== null; end = commentEnd(html, at)) {
    if (end < 0) return false;
    at = afterSpace(html, end);
  }
  MJML_ROOT.lastIndex = at;
  return MJML_ROOT.test(html);
}

/** One complaint of MJML's validator: the line of the source and its message (never its formattedMessage, which names the server's working directory). */
export interface MjmlProblem {
  line: number;
  message: string;
}

export interface CompiledMjml {
  html: string;
  /** What MJML's validator reported (it compiles anyway: validationLevel 'soft'). */
  problems: MjmlProblem[];
}

export async function compileMjml(source: string, field: string): Promise<CompiledMjml> {
  let result: Awaited<ReturnType<typeof mjml2html>>;
  try {
    result = await mjml2html(source, {
      // mj-include would read files of the server: never.
      ignoreIncludes: true,
      // No .mjmlconfig lookup (it loads components from disk); no skeleton file.
      useMjmlConfigOptions: false,
      // Reported, not thrown: the caller decides which complaints refuse a template (an
      // attribute holding {{variable}} fails MJML's type checks, and a template saved before
      // they were enforced must still send).
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
  const problems = (result.errors ?? []).map((error) => ({ line: Number(error.line), message: String(error.message ?? '').trim() }));
  return { html: result.html, problems };
}
