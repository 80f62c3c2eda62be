// Request validation with TypeBox: each route schema is compiled once, at start. Bodies
// are checked as sent (a number is never taken for a string); query strings and path
// parameters arrive as text, so they are converted first (limit=10 becomes 10).
import type { FastifyInstance } from 'fastify';
import { FormatRegistry, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { RelayError } from '../../domain/errors.ts';

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set('date-time', (v) => ISO_DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));
}

const partNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** "/to/3" → "to[3]"; "/headers/X-Foo" → "headers.X-Foo". */
function fieldOf(path: string): string {
  return path
    .split('/')
    .filter(Boolean)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, seg) => (/^\d+$/.test(seg) ? `${acc}[${seg}]` : acc ? `${acc}.${seg}` : seg), '');
}

export function installTypeBoxValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const checker = TypeCompiler.Compile(schema as TSchema);
    const part = partNames[httpPart ?? 'body'] ?? String(httpPart);
    const convert = httpPart === 'querystring' || httpPart === 'params';
    return (data: unknown) => {
      const value = convert ? Value.Convert(schema as TSchema, Value.Clone(data ?? {})) : data;
      if (checker.Check(value)) return { value };
      const first = checker.Errors(value).First();
      const field = first ? fieldOf(first.path) : '';
      const message = first?.schema?.errorMessage ?? first?.message ?? 'is invalid';
      return { error: new RelayError('validation_error', `${field ? `${part}.${field}` : part}: ${message}`) };
    };
  });
}
