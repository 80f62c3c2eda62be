// What a template may say, decided on the parsed template (handlebars AST), never by pattern
// matching the source: variables by flat name, and `if` / `unless` blocks on a variable.
// Nothing else: no helpers, partials, decorators, paths into values, or context changes,
// so that a template cannot reach files, the network or prototypes, and so that the
// variables a template uses are exactly the names found here.
//
// The node shapes are the subset of handlebars' AST this module reads; the parser lives in
// infra/rendering, this stays pure.
import { RelayError } from '../errors.ts';
import { isVariableName } from './variables.ts';

export interface Position { line: number; column: number }
export interface TemplateNode {
  type: string;
  loc?: { start: Position } | null;
  [key: string]: unknown;
}
interface PathNode extends TemplateNode { type: 'PathExpression'; data: boolean; depth: number; parts: string[]; original: string }
interface ProgramNode extends TemplateNode { type: 'Program'; body: TemplateNode[] }

/**
 * How deep blocks may nest: {{#if}} and {{#unless}} each add a level, and so does each
 * {{else if}} of a chain (it is a block inside the one before). Real templates use a handful;
 * handlebars' own compiler overflows its stack a few thousand deep, and its parser slows down
 * with depth long before that, so the limit is checked before parsing too
 * (infra/rendering/handlebars-environment.ts).
 */
export const MAX_BLOCK_DEPTH = 32;

/** The 400 for a template nested deeper than MAX_BLOCK_DEPTH, at the block that went too deep. */
export function nestingTooDeep(field: string, at: Position | null): RelayError {
  const where = at ? `line ${at.line}, column ${at.column + 1}: ` : '';
  return new RelayError('validation_error', `${field}: ${where}blocks nest more than ${MAX_BLOCK_DEPTH} deep ({{#if}}, {{#unless}} and each {{else if}} add a level); flatten the template`);
}

/** Block helpers a template may use; both keep the context, so every name is a top-level variable. */
export const BLOCK_HELPERS = ['if', 'unless'] as const;

export interface FieldAnalysis {
  /** Variable names in order of first use. */
  variables: string[];
  /** Times each variable is written out (not counting conditions): bounds the rendered size. */
  outputs: Record<string, number>;
  /** Characters of literal text, every branch included. */
  staticLength: number;
}

export interface AnalyzeOptions {
  /** Field named in errors, e.g. "body.html". */
  field: string;
  /** html: values must be escaped, so {{{x}}} and {{& x}} are refused. */
  escapedOnly: boolean;
}

class Walker {
  readonly seen = new Set<string>();
  readonly outputs: Record<string, number> = Object.create(null);
  staticLength = 0;
  depth = 0;
  readonly options: AnalyzeOptions;
  constructor(options: AnalyzeOptions) {
    this.options = options;
  }

  fail(node: TemplateNode, reason: string): never {
    const at = node.loc?.start ? `line ${node.loc.start.line}, column ${node.loc.start.column + 1}: ` : '';
    throw new RelayError('validation_error', `${this.options.field}: ${at}${reason}`);
  }

  variable(node: TemplateNode): string {
    if (node.type !== 'PathExpression') this.fail(node, 'only variable names may appear inside {{ }}');
    const path = node as PathNode;
    if (path.data) this.fail(node, `@-variables such as {{${path.original}}} are not supported`);
    if (path.depth > 0 || path.parts.length === 0) this.fail(node, `{{${path.original}}} does not name a variable`);
    if (path.parts.length > 1) this.fail(node, `{{${path.original}}}: variables are flat values; paths into them are not supported`);
    const name = path.parts[0];
    if ((BLOCK_HELPERS as readonly string[]).includes(name)) this.fail(node, `{{${name}}} is a block helper; write {{#${name} variable}}…{{/${name}}}`);
    if (!isVariableName(name)) this.fail(node, `"${name}" is not a valid variable name (a letter, then up to 63 letters, digits and _)`);
    this.seen.add(name);
    return name;
  }

  noArguments(node: TemplateNode) {
    const params = node.params as unknown[] | undefined;
    const hash = node.hash as { pairs?: unknown[] } | undefined;
    if ((params && params.length > 0) || (hash && hash.pairs && hash.pairs.length > 0)) {
      this.fail(node, 'helpers are not available: write {{variable}}, {{#if variable}} or {{#unless variable}}');
    }
  }

  program(node: TemplateNode | null | undefined) {
    if (!node) return;
    if ((node as ProgramNode).blockParams && ((node as ProgramNode).blockParams as unknown[]).length > 0) this.fail(node, 'block parameters are not supported');
    for (const statement of (node as ProgramNode).body) this.statement(statement);
  }

  statement(node: TemplateNode) {
    switch (node.type) {
      case 'ContentStatement':
        this.staticLength += (node.value as string).length;
        return;
      case 'CommentStatement':
        return;
      case 'MustacheStatement': {
        this.noArguments(node);
        if (this.options.escapedOnly && node.escaped === false) {
          this.fail(node, 'values are always HTML-escaped here: use {{name}}, not {{{name}}} or {{& name}}');
        }
        const name = this.variable(node.path as TemplateNode);
        this.outputs[name] = (this.outputs[name] ?? 0) + 1;
        return;
      }
      case 'BlockStatement': {
        const path = node.path as TemplateNode;
        const helper = path.type === 'PathExpression' ? (path as PathNode).original : '';
        if (!(BLOCK_HELPERS as readonly string[]).includes(helper)) {
          this.fail(node, `only {{#if}} and {{#unless}} blocks are supported${helper ? `, not {{#${helper}}}` : ''}`);
        }
        const params = node.params as TemplateNode[];
        const hash = node.hash as { pairs?: unknown[] } | undefined;
        if (params.length !== 1 || (hash?.pairs?.length ?? 0) > 0) this.fail(node, `{{#${helper}}} takes exactly one variable`);
        if (this.depth >= MAX_BLOCK_DEPTH) throw nestingTooDeep(this.options.field, node.loc?.start ?? null);
        this.variable(params[0]);
        this.depth++;
        this.program(node.program as TemplateNode);
        this.program(node.inverse as TemplateNode | null);
        this.depth--;
        return;
      }
      case 'PartialStatement':
      case 'PartialBlockStatement':
        return this.fail(node, 'partials are not supported');
      case 'Decorator':
      case 'DecoratorBlock':
        return this.fail(node, 'decorators are not supported');
      default:
        return this.fail(node, `unsupported template construct ${node.type}`);
    }
  }
}

/** The variables one field of a template uses, or a 400 validation_error naming the field and place. */
export function analyzeTemplateAst(ast: TemplateNode, options: AnalyzeOptions): FieldAnalysis {
  const walker = new Walker(options);
  walker.program(ast);
  return { variables: [...walker.seen], outputs: { ...walker.outputs }, staticLength: walker.staticLength };
}

/** Names used by any of the fields, each once, sorted: the `variables` of a Template. */
export function variablesOf(analyses: Array<FieldAnalysis | null>): string[] {
  return [...new Set(analyses.flatMap((a) => a?.variables ?? []))].sort();
}
