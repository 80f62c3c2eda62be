// The one mapping from error codes to HTTP statuses, and the spec's envelope
// {error: {code, message}} for every failure, including fastify's own.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RelayError, type ErrorCode } from '../../domain/errors.ts';

export const httpStatusOf: Record<ErrorCode, number> = {
  validation_error: 400,
  invalid_api_key: 401,
  session_required: 401,
  invalid_credentials: 401,
  forbidden: 403,
  origin_not_allowed: 403,
  production_not_enabled: 403,
  not_found: 404,
  content_expired: 410,
  conflict: 409,
  idempotency_conflict: 409,
  message_too_large: 413,
  domain_not_verified: 422,
  sender_not_allowed: 422,
  test_recipient_not_allowed: 422,
  invalid_template_variables: 422,
  unsafe_destination: 422,
  request_timeout: 408,
  headers_too_large: 431,
  http_version_not_supported: 505,
  expectation_failed: 417,
  unsupported_content_encoding: 415,
  rate_limit_exceeded: 429,
  quota_exceeded: 429,
  internal_error: 500,
  service_unavailable: 503,
};

export interface ErrorBody {
  error: { code: string; message: string };
}

export const envelope = (code: string, message: string): ErrorBody => ({ error: { code, message } });

export interface ParserErrorAnswer { status: number; code: ErrorCode; message: string }

/** A request line that is not `method SP target SP HTTP-version CRLF` (RFC 9112 3). */
const REQUEST_LINE_REFUSED = 'HPE_INVALID_REQUEST_LINE';

/**
 * The code a parser error is answered by (parserErrorAnswer): llhttp's own, except where one of
 * its codes covers two problems that only its reason tells apart. HPE_INVALID_VERSION is both a
 * version Relay does not serve ("Invalid HTTP version": HTTP/1.2, 3.7) and a request line that
 * does not end right after its version ("Expected CRLF after version": a bare LF, a space, a
 * third digit; "Expected dot": HTTP/11); HPE_INVALID_CONSTANT is both a request line without
 * "HTTP/" and a malformed HTTP/2 preface. A malformed request line is named by a code of Relay's
 * own, HPE_INVALID_REQUEST_LINE (an HPE_ code like llhttp's, answered as they are).
 */
export function parserErrorCode(error: { code?: string; reason?: string }): string | undefined {
  const { code, reason } = error;
  if (code === 'HPE_INVALID_VERSION' && reason !== undefined && reason !== 'Invalid HTTP version') return REQUEST_LINE_REFUSED;
  if (code === 'HPE_STRICT' && reason === 'Expected CRLF after version') return REQUEST_LINE_REFUSED;
  if (code === 'HPE_INVALID_CONSTANT' && reason?.startsWith('Expected HTTP/')) return REQUEST_LINE_REFUSED;
  return code;
}

/**
 * What Node's HTTP parser refuses before fastify sees a request (llhttp's HPE_* codes, as
 * parserErrorCode names them), and Node's header and request timeouts. Statuses follow HTTP;
 * the codes are the registry's.
 */
export function parserErrorAnswer(nodeCode: string, limits: { maxHeaderBytes: number; headersTimeoutMs: number; requestTimeoutMs: number }): ParserErrorAnswer {
  const bad = (message: string): ParserErrorAnswer => ({ status: 400, code: 'validation_error', message });
  switch (nodeCode) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408, code: 'request_timeout',
        message: `request: headers must arrive within ${limits.headersTimeoutMs / 1000} s and the whole request within ${limits.requestTimeoutMs / 1000} s`,
      };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: `headers: the request line and headers exceed ${Math.round(limits.maxHeaderBytes / 1024)} KiB` };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, code: 'message_too_large', message: 'body: chunk extensions are too large' };
    case 'HPE_INVALID_VERSION':
      return { status: 505, code: 'http_version_not_supported', message: 'request: only HTTP/1.0 and HTTP/1.1 are served' };
    case REQUEST_LINE_REFUSED:
      return bad('request: the request line is malformed: it must be the method, the target and HTTP/1.1 (or HTTP/1.0), separated by single spaces and ended by CRLF (a bare LF ends no line)');
    case 'HPE_INVALID_METHOD':
      return bad('request: the method is not a known HTTP method');
    case 'HPE_INVALID_URL':
      return bad('request: the request target is not a valid URL');
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return bad('header Content-Length: must be one decimal number, and not sent together with Transfer-Encoding');
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return bad('header Transfer-Encoding: only chunked is supported');
    case 'HPE_CR_EXPECTED':
    case 'HPE_LF_EXPECTED':
      return bad('request: a header line (or a line of the chunked body) is malformed: it must end with CRLF, not a bare LF or CR');
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_INVALID_EOF_STATE':
    case 'HPE_STRICT':
      return bad('request: the request is not valid HTTP/1.1 framing');
    case 'HPE_INVALID_HEADER_TOKEN':
      return bad('headers: a header line is malformed (a character its name or value may not hold, or a bare LF where CRLF belongs)');
    case 'HPE_INVALID_CONSTANT':
      return bad('headers: a header line is malformed');
    default:
      return bad('request: the request is not valid HTTP/1.1');
  }
}

/** An Expect other than 100-continue (RFC 9110 10.1.1): the same request without it may succeed. */
export const EXPECTATION_FAILED: ParserErrorAnswer = {
  status: httpStatusOf.expectation_failed, code: 'expectation_failed', message: 'header Expect: only 100-continue is supported',
};

/** Turns fastify's validation output into one sentence that names the field. */
function describeValidation(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return error.message;
  const where = error.validationContext ?? 'body';
  const params = first.params as Record<string, unknown>;
  const path = (first.instancePath || '').replace(/^\//, '').replace(/\//g, '.');
  const field = params.missingProperty
    ? [path, params.missingProperty].filter(Boolean).join('.')
    : params.additionalProperty
      ? [path, params.additionalProperty].filter(Boolean).join('.')
      : path;
  const subject = field ? `${where}.${field}` : where;
  if (params.additionalProperty) return `${subject} is not an allowed property`;
  if (params.missingProperty) return `${subject} is required`;
  return `${subject} ${first.message ?? 'is invalid'}`;
}

/** What the API answers an error with: the status, the envelope's code and message. */
export interface ErrorAnswer {
  status: number;
  code: ErrorCode;
  message: string;
  /** Seconds for a Retry-After header (a rate limit or a quota). */
  retryAfterSeconds?: number;
}

/**
 * The answer to an error a route threw or fastify raised. The error handler sends it, and the
 * admission metrics count its code, so what is counted is what the client was told.
 */
export function errorAnswerOf(error: unknown, bodyLimit?: number): ErrorAnswer {
  if (error instanceof RelayError) {
    const { retryAfterSeconds } = error.details;
    return {
      status: httpStatusOf[error.code], code: error.code, message: error.message,
      ...(typeof retryAfterSeconds === 'number' ? { retryAfterSeconds } : {}),
    };
  }
  const fe = error as FastifyError;
  if (fe.validation) return { status: 400, code: 'validation_error', message: describeValidation(fe) };
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return { status: 413, code: 'message_too_large', message: `the request body exceeds ${bodyLimit === undefined ? 'its limit' : bytesText(bodyLimit)}` };
  }
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return { status: 400, code: 'validation_error', message: 'body: the request body must be JSON (Content-Type: application/json)' };
  }
  // fastify's own client errors (malformed JSON, empty body with a JSON content type, ...).
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) return { status: 400, code: 'validation_error', message: fe.message };
  return { status: 500, code: 'internal_error', message: 'internal server error' };
}

/** "10 MiB", "16 KiB", "1000 bytes". */
function bytesText(bytes: number): string {
  if (bytes % 1_048_576 === 0) return `${bytes / 1_048_576} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/**
 * `unrouted` answers first, when it has an answer, a request that reached no route because its
 * target is not one a route could serve (server.ts, requestTargets: `*`, a fragment, an
 * absolute-form URI's authority), or a browser's navigation to an address that is no dashboard
 * page (the dashboard's "Page not found", apps/dashboard/dashboard.ts); it returns the reply it
 * answered with. Every other request no route serves gets the `not_found` envelope.
 */
export function registerErrorHandling(app: FastifyInstance, unrouted?: (request: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined): void {
  app.setErrorHandler((error: FastifyError | RelayError | Error, request, reply) => {
    // The route's own limit: most take a send's 10 MiB, a sign-in far less.
    const answer = errorAnswerOf(error, request.routeOptions.bodyLimit);
    // Relay's own errors were thrown on purpose; anything else answering 500 is a defect to log.
    if (answer.code === 'internal_error' && !(error instanceof RelayError)) request.log.error({ err: error }, 'unhandled error');
    if (answer.retryAfterSeconds !== undefined) reply.header('retry-after', String(answer.retryAfterSeconds));
    return reply.status(answer.status).send(envelope(answer.code, answer.message));
  });
  app.setNotFoundHandler((request, reply) =>
    unrouted?.(request, reply) ?? reply.status(404).send(envelope('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`)),
  );
}
