// Compiles a template once (handlebars on each field; an MJML html is checked as written, then
// compiled by MJML, its mustaches carried through: ./mjml-mustaches.ts) and renders it many
// times: values merged (HTML-escaped in html, plain in text and subject), html sanitized after
// the merge, so neither the template nor a value can put active content into a message.
import { MAX_SUBJECT_LENGTH } from '../../domain/email/send-request.ts';
import { RelayError } from '../../domain/errors.ts';
import { characterCount } from '../../domain/text.ts';
import { deepestRendering } from '../../domain/templates/deepest-rendering.ts';
import { analyzeTemplateAst, variablesOf, type FieldAnalysis, type TemplateNode } from '../../domain/templates/syntax.ts';
import { checkVariableCount, invalidVariables, requireVariables, type TemplateVariables, type VariableValue } from '../../domain/templates/variables.ts';
import { compileParsed, escapedLength, parseTemplate, type RenderFunction } from './handlebars-environment.ts';
import { compileMjml, isMjmlDocument, type MjmlProblem } from './mjml.ts';
import { markMustaches, type MarkedMjml, type MustacheRun } from './mjml-mustaches.ts';
import { HtmlTooDeepError, sanitizeEmailHtml } from './sanitize.ts';

/**
 * The longest a rendered body may be (html or text), checked on the upper bound (every branch
 * taken) before anything is built. A direct send may carry 10,000,000 characters, but a
 * rendering is work Relay does (merging, then sanitizing html at a few MB/s): 9 MB of
 * entity-heavy values took 2.5 s per send. A template holds at most 1,000,000 characters, so
 * this still leaves room for a full-size template and its values.
 */
export const MAX_RENDERED_BODY_LENGTH = 2_000_000;

export interface TemplateSource {
  subject: string;
  html: string | null;
  text: string | null;
}

/**
 * What a compiled template keeps on its thread's heap once it has rendered (handlebars builds
 * its function at the first rendering), estimated from its shape. Measured on Node 24: about 4
 * bytes per character of a field (html as compiled from MJML), 1,300 per {{variable}}, 3,200 to
 * 4,000 per {{#if}} or {{#unless}} block, 300 to 350 per stretch of literal text; rounded up
 * here. So 40,000 {{v}} in a row (200,000 characters) keep 52 MB, 10,000
 * `<td class="x">{{v}}</td>` 16 MB, 360,000 characters of plain HTML 1.3 MB. Comments are
 * dropped before compiling (dropComments): 199,000 `{{!}}` keep about 3 MB (estimated 5 MB);
 * kept, they were about 50 MB. Checked again on Node 24 with these estimates: estimated/retained
 * 1.3 for {{v}}, 1.2 for {{#if}}…{{else}}…{{/if}}, 1.4 for the <td>, 1.6 for plain HTML, 1.1
 * to 4 for comment-heavy sources, 2 for an MJML document.
 */
const RETAINED_BYTES = { character: 5, variable: 1_500, block: 3_500, text: 400 } as const;

/**
 * Statements of each kind in a parsed field, comments dropped (blocks nest at most
 * MAX_BLOCK_DEPTH deep). What a field may hold was checked (analyzeTemplateAst): text,
 * {{variables}}, {{#if}} and {{#unless}} blocks (their programs, an {{else if}} a block in the
 * inverse) and comments; anything else is counted as a block, the dearest, rather than ignored.
 */
function countStatements(node: TemplateNode | null | undefined, counts = { variable: 0, block: 0, text: 0 }) {
  for (const statement of (node?.body as TemplateNode[] | undefined) ?? []) {
    if (statement.type === 'MustacheStatement') counts.variable++;
    else if (statement.type === 'ContentStatement') counts.text++;
    else if (statement.type !== 'CommentStatement') {
      counts.block++;
      countStatements(statement.program as TemplateNode | null, counts);
      countStatements(statement.inverse as TemplateNode | null, counts);
    }
  }
  return counts;
}

/**
 * Drops the comments of a parsed field, which render nothing (handlebars applied their `~` and
 * standalone-line whitespace rules while parsing), and joins the stretches of text they
 * separated: the compiled template keeps its parsed field, and 199,000 `{{!}}` kept about 50 MB
 * of nodes that the estimate, which counts characters, put at 5 MB.
 */
function dropComments(node: TemplateNode | null | undefined): void {
  const body = node?.body as TemplateNode[] | undefined;
  if (!body) return;
  const kept: TemplateNode[] = [];
  // The run of text statements (separated by comments only) that ends `kept`, when longer than one.
  let run: TemplateNode[] = [];
  const joinRun = () => {
    if (run.length > 1) {
      const [first] = run;
      const last = run[run.length - 1];
      kept[kept.length - 1] = {
        ...first,
        value: run.map((text) => text.value as string).join(''),
        original: run.map((text) => text.original as string).join(''),
        loc: first.loc && last.loc ? ({ ...first.loc, end: (last.loc as { end?: unknown }).end } as TemplateNode['loc']) : first.loc,
      };
    }
    run = [];
  };
  for (const statement of body) {
    if (statement.type === 'CommentStatement') continue;
    if (statement.type === 'ContentStatement') {
      if (run.length === 0) kept.push(statement);
      run.push(statement);
      continue;
    }
    joinRun();
    kept.push(statement);
    dropComments(statement.program as TemplateNode | null);
    dropComments(statement.inverse as TemplateNode | null);
  }
  joinRun();
  body.length = 0;
  for (const statement of kept) body.push(statement);
}

/** A field's literal text with every branch taken and every value empty (staticLength characters). */
function everyBranch(node: TemplateNode | null | undefined, parts: string[] = []): string[] {
  for (const statement of (node?.body as TemplateNode[] | undefined) ?? []) {
    if (statement.type === 'ContentStatement') parts.push(statement.value as string);
    else if (statement.type === 'BlockStatement') {
      everyBranch(statement.program as TemplateNode, parts);
      everyBranch(statement.inverse as TemplateNode | null, parts);
    }
  }
  return parts;
}

export interface RenderedEmail {
  subject: string;
  /** Null when the template has no html (or an empty one). */
  html: string | null;
  text: string | null;
}

interface CompiledField {
  name: 'subject' | 'html' | 'text';
  /** Named in errors about the template, e.g. "body.html (as compiled from MJML)". */
  field: string;
  /** Kept by the render function anyway (handlebars compiles from it); comments dropped. */
  ast: TemplateNode;
  analysis: FieldAnalysis;
  render: RenderFunction;
  /** Length of one value once written into this field. */
  lengthOf: (value: VariableValue) => number;
  /** Heap it keeps once rendered (RETAINED_BYTES). */
  estimatedBytes: number;
}

export interface CompiledTemplate {
  /** Every variable subject, html and text use, sorted. */
  readonly variables: string[];
  /** html was an MJML document (compiled to HTML before the merge). */
  readonly mjml: boolean;
  /** About how much heap it keeps once it has rendered (for the compiled-template cache's budget). */
  readonly estimatedBytes: number;
  /**
   * Renders with checked values (domain/templates/variables.ts); 422 invalid_template_variables
   * naming `${variablesField}.<name>` when they do not fit the template.
   */
  render(values: TemplateVariables, variablesField?: string): RenderedEmail;
  /**
   * Does once, when the template is saved, the work every send of it will do, so that a
   * template no send could render is refused then (400 validation_error naming the field), not
   * at every send: at most MAX_VARIABLES variables, the literal text of each field (every branch
   * taken) within MAX_RENDERED_BODY_LENGTH, handlebars' code generated (it waits for the first
   * rendering otherwise), and the html sanitized, every value empty, on its deepest rendering
   * (domain/templates/deepest-rendering.ts: refused when too deep) and with every branch taken,
   * which bounds what sanitizing costs a send apart from its values. Run within the save's time
   * and heap limits, it refuses a template whose sends could not fit them.
   */
  rehearse(): void;
}

function compileField(name: CompiledField['name'], source: string, field: string, escape: boolean, where = field): CompiledField {
  const ast = parseTemplate(source, where);
  const analysis = analyzeTemplateAst(ast, { field: where, escapedOnly: escape });
  dropComments(ast);
  const counts = countStatements(ast);
  return {
    name,
    field: where,
    ast,
    analysis,
    render: compileParsed(ast, escape),
    lengthOf: escape ? escapedLength : (value) => String(value).length,
    estimatedBytes: source.length * RETAINED_BYTES.character + counts.variable * RETAINED_BYTES.variable
      + counts.block * RETAINED_BYTES.block + counts.text * RETAINED_BYTES.text,
  };
}

/** Upper bound of the rendered length, every branch taken: refuses a rendering before it is built. */
function checkRenderedSize(field: CompiledField, values: TemplateVariables, limit: number, variablesField: string): void {
  let total = field.analysis.staticLength;
  let largest: [string, number] = ['', 0];
  for (const [name, times] of Object.entries(field.analysis.outputs)) {
    const size = times * field.lengthOf(values[name]);
    total += size;
    if (size > largest[1]) largest = [name, size];
  }
  if (total > limit) {
    throw invalidVariables(`${variablesField}${largest[0] ? `.${largest[0]}` : ''}`, `the rendered ${field.name} would exceed ${limit.toLocaleString('en-US')} characters`);
  }
}

function checkRenderedSubject(subject: string, field: CompiledField, values: TemplateVariables, variablesField: string): string {
  if (/[\r\n]/.test(subject)) {
    const culprit = field.analysis.variables.find((name) => /[\r\n]/.test(String(values[name])));
    throw invalidVariables(`${variablesField}${culprit ? `.${culprit}` : ''}`, 'the rendered subject must not contain CR or LF');
  }
  const length = characterCount(subject);
  if (length < 1 || length > MAX_SUBJECT_LENGTH) {
    throw invalidVariables(variablesField, `the rendered subject must be 1 to ${MAX_SUBJECT_LENGTH} characters (got ${length})`);
  }
  return subject;
}

function checkStaticSize(field: CompiledField): void {
  const length = field.analysis.staticLength;
  if (length > MAX_RENDERED_BODY_LENGTH) {
    throw new RelayError('validation_error', `${field.field}: its text comes to ${length.toLocaleString('en-US')} characters before any value (every {{#if}} and {{#unless}} branch taken), more than the ${MAX_RENDERED_BODY_LENGTH.toLocaleString('en-US')} a rendered ${field.name} may hold`);
  }
}

/** Sanitizes a rendering's html: nested too deep, it is 422 naming the values, which chose its branches (a save refuses html too deep on its deepest rendering). */
function sanitizeRendered(html: string, variablesField: string): string {
  try {
    return sanitizeEmailHtml(html);
  } catch (error) {
    if (error instanceof HtmlTooDeepError) throw invalidVariables(variablesField, `in the rendered html ${error.message}`);
    throw error;
  }
}

/**
 * MJML's complaints that refuse a template: all but a type error on an attribute whose value
 * holds `{{` (`background-color="{{brand}}"` is no Color until it is rendered).
 */
function refusedMjmlProblems(problems: MjmlProblem[]): MjmlProblem[] {
  return problems.filter((problem) => {
    const typeError = /^Attribute \S+ has invalid value: ([\s\S]*) for type /.exec(problem.message);
    return !(typeError && typeError[1].includes('{{'));
  });
}

function invalidMjml(field: string, problems: MjmlProblem[], marks: MarkedMjml): RelayError {
  const [first] = [...problems].sort((a, b) => a.line - b.line);
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more ${problems.length === 2 ? 'problem' : 'problems'} MJML reports)` : '';
  const where = Number.isFinite(first.line) && first.line > 0 ? `line ${first.line}: ` : '';
  return new RelayError('validation_error', `${field}: ${where}invalid MJML: ${marks.unmark(first.message)}${more}`);
}

function lostMustache(field: string, run: MustacheRun): RelayError {
  return new RelayError('validation_error', `${field}: line ${run.line}, column ${run.column}: ${run.first} would be lost: MJML keeps text only inside its content elements (mj-text, mj-button, mj-title, mj-preview, mj-raw, …) and their attributes, and drops it between elements and in the rules of an inlined <mj-style>; put it inside an MJML content element or <mj-raw>`);
}

/**
 * The html of an MJML template. Authoring (a save, a preview): the handlebars is parsed and
 * checked on the source as written (errors at the author's line and column, the same rules as
 * any html), MJML's validator's complaints refuse it (refusedMjmlProblems), and so does a
 * mustache MJML would drop (./mjml-mustaches.ts), naming where it is. A stored template (a send)
 * was checked when it was saved, perhaps under older rules: it renders as it did then, none of
 * those refusals applied, and when its source does not parse as handlebars on its own (MJML
 * dropped the part that does not), its mustaches are found in what MJML makes of it, as they
 * were before they were checked on the source.
 */
async function compileMjmlHtml(source: string, field: string, authoring: boolean): Promise<CompiledField> {
  const compiledField = `${field} (as compiled from MJML)`;
  const asBefore = async () => compileField('html', (await compileMjml(source, field)).html, field, true, compiledField);
  let ast: TemplateNode;
  try {
    ast = parseTemplate(source, field);
    if (authoring) analyzeTemplateAst(ast, { field, escapedOnly: true });
  } catch (error) {
    if (authoring || !(error instanceof RelayError)) throw error;
    return asBefore();
  }
  const marks = markMustaches(source, ast);
  const compiled = await compileMjml(marks.marked, field);
  if (authoring) {
    const problems = refusedMjmlProblems(compiled.problems);
    if (problems.length > 0) throw invalidMjml(field, problems, marks);
  }
  const { html, lost } = marks.restore(compiled.html);
  if (authoring && lost.length > 0) throw lostMustache(field, lost[0]);
  try {
    return compileField('html', html, field, true, compiledField);
  } catch (error) {
    if (authoring || !(error instanceof RelayError)) throw error;
    return asBefore();
  }
}

/**
 * Compiles a template. Template errors (syntax, constructs that are not allowed, MJML that
 * does not compile, is invalid or would drop a mustache) are 400 validation_error naming
 * `${prefix}.subject|html|text`. `use`: 'authoring' for a save or a preview, 'stored' for a
 * send of a saved template, which MJML's rules added since it was saved do not refuse
 * (compileMjmlHtml).
 */
export async function compileTemplate(source: TemplateSource, prefix = 'body', use: 'authoring' | 'stored' = 'authoring'): Promise<CompiledTemplate> {
  const subject = compileField('subject', source.subject, `${prefix}.subject`, false);
  const mjml = !!source.html && isMjmlDocument(source.html);
  let html: CompiledField | null = null;
  if (source.html) {
    html = mjml
      ? await compileMjmlHtml(source.html, `${prefix}.html`, use === 'authoring')
      : compileField('html', source.html, `${prefix}.html`, true);
  }
  const text = source.text ? compileField('text', source.text, `${prefix}.text`, false) : null;
  const variables = variablesOf([subject.analysis, html?.analysis ?? null, text?.analysis ?? null]);
  const fields = [subject, html, text].filter((field): field is CompiledField => field !== null);
  return {
    variables,
    mjml,
    estimatedBytes: subject.estimatedBytes + (html?.estimatedBytes ?? 0) + (text?.estimatedBytes ?? 0),
    render(values: TemplateVariables, variablesField = 'body.variables'): RenderedEmail {
      requireVariables(variables, values, variablesField);
      for (const field of [html, text]) if (field) checkRenderedSize(field, values, MAX_RENDERED_BODY_LENGTH, variablesField);
      checkRenderedSize(subject, values, MAX_RENDERED_BODY_LENGTH, variablesField);
      const renderedSubject = checkRenderedSubject(subject.render(values), subject, values, variablesField);
      return {
        subject: renderedSubject,
        html: html ? sanitizeRendered(html.render(values), variablesField) : null,
        text: text ? text.render(values) : null,
      };
    },
    rehearse(): void {
      checkVariableCount(fields.map((field) => ({ field: field.field, variables: field.analysis.variables })));
      for (const field of fields) checkStaticSize(field);
      const empty: TemplateVariables = Object.assign(Object.create(null), Object.fromEntries(variables.map((name) => [name, ''])));
      for (const field of fields) field.render(empty);
      if (!html) return;
      const deepest = deepestRendering(html.ast).text;
      try {
        sanitizeEmailHtml(deepest);
      } catch (error) {
        if (error instanceof HtmlTooDeepError) {
          throw new RelayError('validation_error', `${html.field}: ${error.message} on the deepest rendering (each {{#if}} and {{#unless}} taking its deepest branch); close them or flatten the html`);
        }
        throw error;
      }
      const every = everyBranch(html.ast).join('');
      if (every === deepest) return;
      try {
        sanitizeEmailHtml(every);
      } catch (error) {
        // The branches of a block nest in each other here as no rendering's do: the depth is the deepest rendering's to judge.
        if (!(error instanceof HtmlTooDeepError)) throw error;
      }
    },
  };
}
