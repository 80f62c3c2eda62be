// The one parser of JSON request bodies, for every route and for requests no route serves.
// fastify's own parser ran JSON.parse on any body up to the 10 MiB limit, on unknown routes
// and before a handler's refusal too: 10 MiB of `[[[[…` held the event loop for seconds
// (JSON.parse recurses), with no key and no session. And it decoded bytes that are not UTF-8
// into U+FFFD without a word, so a Latin-1 "Café" was stored as "Caf\uFFFD".
//
// A request no route serves never gets here: it is answered before its body is read
// (apps/api/connection-limits.ts). Here, in this order: a charset other than UTF-8 and bytes
// that are not UTF-8 are refused (JSON between systems is UTF-8: RFC 8259 §8.1); then the
// route's bounds are scanned before JSON.parse (apps/api/json-body.ts), so no body costs more
// than a linear pass and a bounded parse.
import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RelayError } from '../../domain/errors.ts';
import { exactJsonParser, type JsonBounds } from './json-body.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's bounds on its JSON body (nesting, keys and items), when wider than GENERAL_BODY_BOUNDS. */
    jsonBounds?: JsonBounds;
  }
}

/**
 * Every body but a send's (SEND_BODY_BOUNDS, the route's own). The widest elsewhere is a
 * template preview or test send: 2 levels, at most 104 keys (its properties and 100
 * variables); management bodies hold a handful. The margin leaves a near miss its route's own
 * answer (422 for variables nested or too many) rather than this bound's 400.
 */
export const GENERAL_BODY_BOUNDS: JsonBounds = {
  maxDepth: 10,
  maxMembers: 1_000,
  note: 'no request body of this API needs more',
};

const notUtf8 = (why: string) => new RelayError('validation_error', `body: must be UTF-8 JSON; ${why}`);

/** The charset parameter of a Content-Type, lower-cased and unquoted, or null without one. */
export function charsetOf(contentType: string | undefined): string | null {
  for (const parameter of (contentType ?? '').split(';').slice(1)) {
    const equals = parameter.indexOf('=');
    if (equals === -1 || parameter.slice(0, equals).trim().toLowerCase() !== 'charset') continue;
    return parameter.slice(equals + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
  }
  return null;
}

type Done = (error: Error | null, body?: unknown) => void;

/** For addContentTypeParser('application/json', { parseAs: 'buffer' }, …) on the root, before any route. */
export function jsonBodyParser(app: FastifyInstance): (request: FastifyRequest, body: Buffer, done: Done) => void {
  const parsers = new Map<JsonBounds, ReturnType<typeof exactJsonParser>>();
  const parserFor = (bounds: JsonBounds) => {
    let parser = parsers.get(bounds);
    if (!parser) parsers.set(bounds, (parser = exactJsonParser(app, bounds)));
    return parser;
  };
  return (request, body, done) => {
    const charset = charsetOf(request.headers['content-type']);
    if (charset !== null && charset !== 'utf-8' && charset !== 'utf8') {
      const named = /^[a-z0-9._:+-]{1,40}$/.test(charset) ? `charset=${charset}` : 'that charset';
      return done(notUtf8(`${named} is not accepted (declare charset=utf-8, or none)`));
    }
    if (!isUtf8(body)) return done(notUtf8('the body holds bytes that are not UTF-8'));
    parserFor(request.routeOptions.config.jsonBounds ?? GENERAL_BODY_BOUNDS)(request, body.toString('utf8'), done);
  };
}
