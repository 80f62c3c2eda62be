// The one handlebars environment templates are compiled in: a private instance (never the
// global one other code could register helpers on), with only `if` and `unless` left, no
// partials or decorators, prototype access off and strict lookups. domain/templates/syntax.ts
// refuses anything else before a template gets here; this is the second wall.
import Handlebars from 'handlebars';
import { RelayError } from '../../domain/errors.ts';
import { MAX_BLOCK_DEPTH, nestingTooDeep, type TemplateNode } from '../../domain/templates/syntax.ts';

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

// handlebars' lexer (jison) and its token numbers, for checkNesting.
interface Lexer { setInput(source: string): void; lex(): number | string; yylloc: { first_line: number; first_column: number } }
const parserModule = (Handlebars as unknown as { Parser: { lexer: Lexer; terminals_: Record<string, string> } }).Parser;
const token = (name: string): number => Number(Object.keys(parserModule.terminals_).find((id) => parserModule.terminals_[id] === name));
const OPENS_BLOCK = new Set([token('OPEN_BLOCK'), token('OPEN_INVERSE'), token('OPEN_PARTIAL_BLOCK'), token('OPEN_RAW_BLOCK')]);
const CHAINS_BLOCK = token('OPEN_INVERSE_CHAIN');
const CLOSES_BLOCK = new Set<number | string>([token('OPEN_ENDBLOCK'), token('END_RAW_BLOCK'), 'END_RAW_BLOCK']);
const END = new Set<number | string>([1, token('EOF'), 'EOF']);

/**
 * Refuses a source nested deeper than MAX_BLOCK_DEPTH before it is parsed: the parser slows down
 * with depth and overflows the stack a few thousand deep. Counted on the lexer's tokens (linear,
 * and exact about comments, raw blocks and escaped mustaches); a source the lexer cannot read is
 * left to the parser to report.
 */
function checkNesting(source: string, field: string): void {
  const lexer = parserModule.lexer;
  lexer.setInput(source);
  // Levels each open block adds: one, plus one per {{else if}} of its chain.
  const open: number[] = [];
  let depth = 0;
  try {
    for (let tok = lexer.lex(); !END.has(tok); tok = lexer.lex()) {
      if (OPENS_BLOCK.has(tok as number)) {
        open.push(1);
        depth++;
      } else if (tok === CHAINS_BLOCK && open.length > 0) {
        open[open.length - 1]++;
        depth++;
      } else if (CLOSES_BLOCK.has(tok)) {
        depth -= open.pop() ?? 0;
      }
      if (depth > MAX_BLOCK_DEPTH) throw nestingTooDeep(field, { line: lexer.yylloc.first_line, column: lexer.yylloc.first_column });
    }
  } catch (error) {
    if (error instanceof RelayError) throw error;
  }
}

/** Parses one field's source; a syntax error is a 400 naming the field, and so is nesting deeper than MAX_BLOCK_DEPTH. */
export function parseTemplate(source: string, field: string): TemplateNode {
  checkNesting(source, field);
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
