// Request validation with TypeBox: each route schema is compiled once, at start. Bodies
// are checked as sent (a number is never taken for a string); query strings and path
// parameters arrive as text, so they are converted first (limit=10 becomes 10).
import type { FastifyInstance } from 'fastify';
import { FormatRegistry, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { RelayError } from '../../domain/errors.ts';

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
/** RFC 3339 date-time whose calendar date exists (Date.parse would roll 02-30 over to March). */
export function isDateTime(value: string): boolean {
  if (!ISO_DATE_TIME.test(value) || Number.isNaN(Date.parse(value))) return false;
  const [year, month, day] = value.slice(0, 10).split('-').map(Number);
  const calendar = new Date(Date.UTC(year, month - 1, day));
  return calendar.getUTCFullYear() === year && calendar.getUTCMonth() === month - 1 && calendar.getUTCDate() === day && Number(value.slice(11, 13)) < 24;
}
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', isDateTime);

const partNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** "/to/3" → "to[3]"; "/headers/X-Foo" → "headers.X-Foo". */
function fieldOf(path: string): string {
  return path
    .split('/')
    .filter(Boolean)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, seg) => (/^\d+$/.test(seg) ? `${acc}[${seg}]` : acc ? `${acc}.${seg}` : seg), '');
}

/**
 * Query strings and path parameters arrive as text. Only canonical decimal text becomes a
 * number (TypeBox's own conversion would read "1.5" as 1 and "0x10" as 16), and only
 * "true"/"false" a boolean; anything else stays text and fails the schema with a 400.
 */
function convertText(schema: TSchema, data: unknown): unknown {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return data;
  const properties = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  const out: Record<string, unknown> = { ...(data as Record<string, unknown>) };
  for (const [name, value] of Object.entries(out)) {
    const type = (properties[name] as { type?: string } | undefined)?.type;
    if (typeof value !== 'string') continue;
    if (type === 'integer' && /^-?(0|[1-9]\d{0,15})$/.test(value)) out[name] = Number(value);
    else if (type === 'number' && /^-?(0|[1-9]\d*)(\.\d+)?$/.test(value)) out[name] = Number(value);
    else if (type === 'boolean' && (value === 'true' || value === 'false')) out[name] = value === 'true';
  }
  return out;
}

export function installTypeBoxValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const checker = TypeCompiler.Compile(schema as TSchema);
    const part = partNames[httpPart ?? 'body'] ?? String(httpPart);
    const convert = httpPart === 'querystring' || httpPart === 'params';
    return (data: unknown) => {
      const value = convert ? convertText(schema as TSchema, data ?? {}) : data;
      if (checker.Check(value)) return { value };
      const first = checker.Errors(value).First();
      const field = first ? fieldOf(first.path) : '';
      const message = first?.schema?.errorMessage ?? first?.message ?? 'is invalid';
      return { error: new RelayError('validation_error', `${field ? `${part}.${field}` : part}: ${message}`) };
    };
  });
}
