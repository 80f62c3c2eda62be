// MJML → responsive HTML. The template's {{variables}} pass through MJML as text and are
// merged afterwards, on the compiled HTML.
import mjml2html from 'mjml';
import { RelayError } from '../../domain/errors.ts';

/** An MJML document is one whose root element is <mjml> (an XML declaration or comments may come first). */
export function isMjmlDocument(html: string): boolean {
  return /^\s*(<\?xml[^>]*\?>\s*)?(<!--[\s\S]*?-->\s*)*<mjml[\s>]/i.test(html);
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
