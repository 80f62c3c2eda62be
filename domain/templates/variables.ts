// TemplateVariables: the values a preview or a template send merges into a template. Every
// failure is 422 invalid_template_variables and names the variable (spec: "422 invalid
// template variables"), including a variable the template uses that the request leaves out.
import { headerTextProblem } from '../email/send-request.ts';
import { RelayError } from '../errors.ts';
import { characterCount } from '../text.ts';

export const MAX_VARIABLES = 100;
export const MAX_VARIABLE_STRING_LENGTH = 10_000;
export const VARIABLE_NAME_PATTERN = '^[A-Za-z][A-Za-z0-9_]{0,63}$';

const nameRegex = new RegExp(VARIABLE_NAME_PATTERN);

export type VariableValue = string | number | boolean;
export type TemplateVariables = Record<string, VariableValue>;

export const isVariableName = (name: string): boolean => nameRegex.test(name);

export const invalidVariables = (field: string, reason: string) =>
  new RelayError('invalid_template_variables', `${field}: ${reason}`);

/**
 * Checks a request's `variables` (absent means none) and returns them as a prototype-free
 * record, so that a rendering can only ever see the names the request holds.
 */
export function checkTemplateVariables(value: unknown, field = 'body.variables'): TemplateVariables {
  if (value === undefined) return Object.create(null) as TemplateVariables;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidVariables(field, 'must be an object');
  const entries = Object.entries(value);
  if (entries.length > MAX_VARIABLES) throw invalidVariables(field, `at most ${MAX_VARIABLES} variables are allowed (got ${entries.length})`);
  const out = Object.create(null) as TemplateVariables;
  for (const [name, v] of entries) {
    if (!isVariableName(name)) {
      throw invalidVariables(`${field}.${name}`, 'variable names start with a letter and hold up to 64 letters, digits and _');
    }
    if (typeof v === 'string') {
      if (characterCount(v) > MAX_VARIABLE_STRING_LENGTH) throw invalidVariables(`${field}.${name}`, `strings are at most ${MAX_VARIABLE_STRING_LENGTH} characters`);
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw invalidVariables(`${field}.${name}`, 'must be a finite number');
    } else if (typeof v !== 'boolean') {
      throw invalidVariables(`${field}.${name}`, 'must be a string, a number or a boolean');
    }
    out[name] = v;
  }
  return out;
}

/**
 * A template may use at most MAX_VARIABLES variables (subject, html and text together): a send
 * must give every variable its template uses and may give no more than MAX_VARIABLES, so no
 * send could render one that uses more. Refused when it is saved (400), naming the field
 * (`fields` in the order subject, html, text) where the count goes past the limit.
 */
export function checkVariableCount(fields: ReadonlyArray<{ field: string; variables: readonly string[] }>): void {
  const all = new Set(fields.flatMap((f) => f.variables));
  if (all.size <= MAX_VARIABLES) return;
  const seen = new Set<string>();
  for (const { field, variables } of fields) {
    for (const name of variables) seen.add(name);
    if (seen.size > MAX_VARIABLES) {
      throw new RelayError('validation_error', `${field}: the template uses ${all.size} variables, more than the ${MAX_VARIABLES} a send may give, so no send could render it`);
    }
  }
}

/** Every variable the template uses must be given: a missing one is named, never rendered as empty. */
export function requireVariables(used: readonly string[], given: TemplateVariables, field = 'body.variables'): void {
  const missing = used.filter((name) => !Object.hasOwn(given, name));
  if (missing.length > 0) {
    const list = missing.join(', ');
    throw invalidVariables(`${field}.${missing[0]}`, `the template uses ${missing.length === 1 ? 'the variable' : 'the variables'} ${list}, which the request does not give`);
  }
}

/**
 * A rendered subject goes into the Subject header, so it follows the character rule of every
 * header-bound field (headerTextProblem: no control characters, separators, lone surrogates,
 * byte order mark or bidirectional overrides). Like CR or LF in a rendered subject, a break is
 * 422 naming the variable whose value brought the character in (`used`: the template's
 * variables), or `field` alone when no value did.
 */
export function checkRenderedSubjectText(subject: string, used: readonly string[], values: TemplateVariables, field = 'body.variables'): string {
  const problem = headerTextProblem(subject);
  if (problem === null) return subject;
  const culprit = used.find((name) => {
    const value = Object.hasOwn(values, name) ? values[name] : undefined;
    return typeof value === 'string' && headerTextProblem(value) !== null && subject.includes(value);
  });
  throw invalidVariables(`${field}${culprit ? `.${culprit}` : ''}`, `the rendered subject ${problem}`);
}
