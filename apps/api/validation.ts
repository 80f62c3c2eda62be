// Request validation with TypeBox: each route schema is compiled once, at start. Bodies
// are checked as sent (a number is never taken for a string); query strings and path
// parameters arrive as text, so they are converted first (limit=10 becomes 10).
import type { FastifyInstance } from 'fastify';
import { FormatRegistry, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { daysIn } from '../../domain/calendar.ts';
import { RelayError } from '../../domain/errors.ts';

// RFC 3339 §5.6: "T" and "Z" may be lower case; years run from 0000. Checked field by field:
// Date.parse leaves lower case to an implementation-defined fallback and rolls 02-30 over to
// March, and Date.UTC reads years 0-99 as 1900-1999.
const RFC3339_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|[+-](\d{2}):(\d{2}))$/i;

/**
 * An RFC 3339 date-time whose calendar date exists. A leap second (":60") is refused: Relay's
 * clock has none, so no instant it records falls in one (INTERFACE-DECISIONS, Reading).
 */
export function isDateTime(value: string): boolean {
  const match = RFC3339_DATE_TIME.exec(value);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  const [offsetHour, offsetMinute] = [Number(match[7] ?? 0), Number(match[8] ?? 0)];
  return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month)
    && hour < 24 && minute < 60 && second < 60 && offsetHour < 24 && offsetMinute < 60;
}
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', isDateTime);

const partNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/**
 * "/to/3" → "to[3]"; "/headers/X-Foo" → "headers.X-Foo". In a query, path or header part the
 * first segment is a parameter's name even when it is digits ("?0=1" → "0", not "[0]").
 */
function fieldOf(path: string, named: boolean): string {
  return path
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, seg, i) => (i === 0 && named ? seg : /^\d+$/.test(seg) ? `${acc}[${seg}]` : acc ? `${acc}.${seg}` : seg), '');
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
      const named = httpPart !== undefined && httpPart !== 'body';
      // "?=1": a name the message could not show.
      if (named && first?.path === '/') return { error: new RelayError('validation_error', `${part}: a parameter without a name is not accepted`) };
      const field = first ? fieldOf(first.path, named) : '';
      const message = first?.schema?.errorMessage ?? first?.message ?? 'is invalid';
      return { error: new RelayError('validation_error', `${field ? `${part}.${field}` : part}: ${message}`) };
    };
  });
}
