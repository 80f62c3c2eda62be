// The one handlebars environment templates are compiled in: a private instance (never the
// global one other code could register helpers on), with only `if` and `unless` left, no
// partials or decorators, prototype access off and strict lookups. domain/templates/syntax.ts
// refuses anything else before a template gets here; this is the second wall.
import Handlebars from 'handlebars';
import { RelayError } from '../../domain/errors.ts';
import type { TemplateNode } from '../../domain/templates/syntax.ts';

const environment = Handlebars.create();
for (const helper of ['each', 'with', 'lookup', 'log']) environment.unregisterHelper(helper);
environment.unregisterDecorator('inline');

const COMPILE_OPTIONS = {
  // Only these may be called; any other {{name ...}} is a compile error, and a bare {{name}}
  // compiles to a plain lookup of the variable rather than a helper call.
  knownHelpers: { if: true, unless: true, each: false, with: false, lookup: false, log: false, helperMissing: false, blockHelperMissing: false },
  knownHelpersOnly: true,
  // A name missing from the values throws instead of rendering as empty (checked earlier too).
  strict: true,
  // No recursive lookup up the context stack.
  compat: false,
  data: false,
} as const;

const RUNTIME_OPTIONS: Handlebars.RuntimeOptions = {
  allowProtoPropertiesByDefault: false,
  allowProtoMethodsByDefault: false,
  allowCallsToHelperMissing: false,
  partials: {},
  decorators: {},
};

export type RenderFunction = (values: Record<string, string | number | boolean>) => string;

/** Parses one field's source; a syntax error is a 400 naming the field. */
export function parseTemplate(source: string, field: string): TemplateNode {
  try {
    return environment.parse(source) as unknown as TemplateNode;
  } catch (error) {
    // Handlebars spreads its message over lines (source excerpt, a caret line); one line here.
    const message = (error instanceof Error ? error.message : String(error))
      .split('\n')
      .filter((line) => !/^-*\^$/.test(line.trim()))
      .join(' ')
      .replace(/\s+/g, ' ')
      .slice(0, 300);
    throw new RelayError('validation_error', `${field}: template syntax: ${message}`);
  }
}

/**
 * Compiles a parsed (and analyzed) field. `escape`: HTML-escape every value (html); off for
 * text and subject, which are plain text.
 */
export function compileParsed(ast: TemplateNode, escape: boolean): RenderFunction {
  const template = environment.compile(ast, { ...COMPILE_OPTIONS, noEscape: !escape });
  return (values) => template(values, RUNTIME_OPTIONS);
}

/** How long a value is once written into html. */
export const escapedLength = (value: string | number | boolean): number => environment.escapeExpression(String(value)).length;
