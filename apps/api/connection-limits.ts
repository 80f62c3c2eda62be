// What one client can hold on to: time (header, request, keep-alive and idle timeouts), the
// socket after a refusal (closed, after a bounded drain so the answer is not lost to a reset),
// and memory (request bodies are admitted against a process-wide budget of bytes in flight; the
// requests of one connection are handled a few at a time: pipelining.ts). Node's own parser
// errors and timeouts are answered in the spec's envelope here too, after the answers the
// connection still owes, and so is a stop: it is bounded, whatever the clients hold open. And
// what Node lets through that HTTP/1.1 refuses: Host (RFC 9112 3.2), transfer codings (6.1),
// Expect (RFC 9110 10.1.1, 100 Continue only once the body is about to be read), and content
// codings Relay does not decode (RFC 9110 8.4, 415). Whatever a request line and headers alone
// refuse (these, the key, the route's path parameters and query) is answered before the body.
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RelayError } from '../../domain/errors.ts';
import { envelope, EXPECTATION_FAILED, parserErrorAnswer } from './error-registry.ts';
import { afterAnswersOwed, limitPipelining } from './pipelining.ts';
import { endThenClose, stopReading } from './socket-closing.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

export interface ConnectionLimits {
  /** From the connection (or the first byte of a request) to the end of its headers. */
  headersTimeoutMs: number;
  /** From the first byte of a request to the last byte of its body (a 10 MiB body at ≥ 350 KiB/s). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (Node adds a 1 s grace). */
  keepAliveTimeoutMs: number;
  /** A socket with no traffic in either direction for this long is destroyed. */
  idleTimeoutMs: number;
  /** Request line plus headers. */
  maxHeaderBytes: number;
  /** Request-body bytes held by all requests of the process at once. */
  bodyBytesInFlight: number;
  /** A body above this size is "large"… */
  largeBodyBytes: number;
  /** …and large bodies together may hold only this much, so ordinary sends always find room. */
  largeBodyBytesInFlight: number;
  /** After a refusal sent before the body was read in full (413, 415, 503, 403, 400): the rest of the body is read
   * and discarded while the body stays within `lingerBytes` in all (so that a client that reads only once it
   * has sent everything, as many do, gets the answer); of a body that announces more nothing is read, and a chunked
   * one is no longer read once past it. The connection is closed when the client is done, or after
   * `lingerMs` at the latest. Discarded bytes are not held: they do not count against the body budget. */
  lingerMs: number;
  lingerBytes: number;
  /** The same bounds after a 404 for a request no route serves (and `unauthenticatedLingerMs` after a parser error or a
   * timeout). After a 401 on a route that takes a body, the body is read and discarded up to the route's own body limit
   * within `lingerMs` (a client that sends its whole body before reading, as Python's urllib does, must get its 401
   * for any body the route would take), but the socket is closed once `unauthenticatedLingerMs` pass without a byte. */
  unauthenticatedLingerMs: number;
  unauthenticatedLingerBytes: number;
  /** How long a stop waits for the requests being handled before it cuts every connection left (stopDrainOf). */
  stopDrainMs: number;
  /** Requests of one connection handled at once; while they are, the connection is not read. */
  requestsInProgress: number;
  /** Requests pipelined past those in what was already read, waiting their turn; past this, 503 and the connection closes. */
  requestsWaiting: number;
}

/**
 * A stop's bound on the API's drain. Requests being handled finish within it with their real
 * answer: an admission takes milliseconds, or up to the flow control's wait for the pipeline
 * (RELAY_ADMISSION_MAX_WAIT_MS, 1 s by default). It leaves most of the stop's deadline
 * (RELAY_SHUTDOWN_TIMEOUT_MS, 25 s by default) to the parts stopped after the API: an SMTP
 * transaction in flight ending, consumer positions committed, the stores closed. Connections
 * with no request in progress and requests whose body is still arriving are not waited for at
 * all (StopDrain).
 */
export const STOP_DRAIN_MS = 3_000;

/** The drain's bound under a stop deadline of `shutdownTimeoutMs`: a shorter deadline keeps the same share (a fifth) for the drain, and the rest for the parts. */
export const stopDrainOf = (shutdownTimeoutMs: number): number => Math.min(STOP_DRAIN_MS, Math.floor(shutdownTimeoutMs / 5));

export const DEFAULT_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 30_000,
  maxHeaderBytes: 16 * KiB,
  bodyBytesInFlight: 64 * MiB,
  largeBodyBytes: 1 * MiB,
  largeBodyBytesInFlight: 48 * MiB,
  // 30 MiB past the 10 MiB limit: an attachment or two too many still gets its 413. At 4 MiB/s
  // and more, the whole of it is in before the deadline.
  lingerMs: 10_000,
  lingerBytes: 40 * MiB,
  unauthenticatedLingerMs: 1_000,
  unauthenticatedLingerBytes: 64 * KiB,
  stopDrainMs: STOP_DRAIN_MS,
  // 16 of the largest answers (the 78 KB OpenAPI document) are about 1.2 MB per connection.
  requestsInProgress: 16,
  requestsWaiting: 64,
};

/** The fastify options that carry the timeouts; spread into Fastify({...}). */
export function serverOptionsOf(limits: ConnectionLimits) {
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: limits.idleTimeoutMs,
    http: {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
      // Node checks header and request deadlines on this period (30 s by default, which would
      // let a request outlive its timeout by up to 30 s).
      connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4))),
      // Node's own refusal of a request without Host has no body: the onRequest check
      // (hostProblem) answers it in the envelope, and lets HTTP/1.0 requests through.
      requireHostHeader: false,
    },
  };
}

// ---------------------------------------------------------------------------------------
// Closing after a refusal

/** Connections that answered a refusal and only wait for the rest of its body: no request after it is run. */
const closing = new WeakSet<Socket>();

/** How long a refused request's socket stays (`ms`, and `idleMs` without a byte from the client) and how much of its body is discarded meanwhile. */
interface Linger { ms: number; bytes: number; idleMs?: number }

/**
 * The bounds after a refusal sent before the body is in. A request no route serves (404), or a
 * bodiless method's 401: the small ones, nothing of it was ever going to be read. A 401 on a
 * route that takes a body: up to that route's own body limit (10 MiB for a send, 16 KiB for a
 * sign-in) within `lingerMs`, so that a client that writes its whole body before it reads gets
 * the 401 for any body the route would have taken; but a caller that failed to identify itself
 * holds the socket no longer than `unauthenticatedLingerMs` without sending a byte. Any other
 * refusal (413, 415, 503, 400 on the headers or the target, 403): the large bounds.
 */
function lingerOf(limits: ConnectionLimits, request: FastifyRequest, status: number, bodyLimit: number): Linger {
  const small = { ms: limits.unauthenticatedLingerMs, bytes: limits.unauthenticatedLingerBytes };
  if (request.is404) return small;
  if (status === 401) {
    if (BODYLESS.has(request.method)) return small;
    const routeLimit = request.routeOptions.bodyLimit ?? bodyLimit;
    return { ms: limits.lingerMs, bytes: Math.min(routeLimit, limits.lingerBytes), idleMs: limits.unauthenticatedLingerMs };
  }
  return { ms: limits.lingerMs, bytes: limits.lingerBytes };
}

/**
 * Marks a response sent before its request's body was read in full: it goes out with
 * Connection: close, and instead of Node's immediate destroy the socket closes within bounds.
 * The rest of the body is read and discarded as long as the body stays within `linger.bytes`
 * in all (`received`: what was read before the refusal): many clients read nothing before
 * they have sent their whole body, and one that is made to wait, or reset, never sees the
 * answer. A body announced larger is not read at all (it could never end in bounds); a
 * chunked one stops being read once past the bound. The socket is destroyed when the body
 * ends or the client closes, or after `linger.ms`, or once `linger.idleMs` pass without a byte.
 */
function closeAfterResponse(request: IncomingMessage, linger: Linger, received: () => number): void {
  const socket = request.socket as Socket & { destroySoon?: () => void };
  if (!socket) return;
  closing.add(socket);
  // Node calls destroySoon once the response is written, for a response with Connection: close.
  socket.destroySoon = () => {
    // The body now goes nowhere: unhook any reader (a preParsing stream, a parser that gave up).
    request.unpipe();
    request.removeAllListeners('data');
    const declared = Number(request.headers['content-length']);
    const chunked = request.headers['transfer-encoding'] !== undefined;
    let size = received();
    // (Nothing read, a client gone quiet: either way the socket has nothing more to wait for.)
    const idle = linger.idleMs === undefined ? undefined : setTimeout(() => socket.destroy(), linger.idleMs);
    if (idle) socket.once('close', () => clearTimeout(idle));
    if (!chunked && !(Number.isSafeInteger(declared) && declared <= linger.bytes)) stopReading(socket);
    else {
      request.on('data', (chunk: Buffer) => {
        idle?.refresh();
        size += chunk.length;
        if (size <= linger.bytes) return;
        request.removeAllListeners('data');
        request.pause();
        stopReading(socket);
      });
      // (unpipe paused it)
      request.resume();
    }
    endThenClose(socket, linger.ms, (done) => {
      request.once('end', done);
      request.once('error', done);
    });
  };
}

// ---------------------------------------------------------------------------------------
// Node's own refusals (unparseable requests, header overflow, timeouts)

const answered = new WeakSet<Socket>();

/**
 * fastify's clientErrorHandler: Node's parser errors and timeouts, in the envelope, then a
 * bounded drain. Requests received in full before the failing one are answered first, in
 * order (RFC 9112 9.3.2): a client takes the first answer on a connection for its first
 * request, so a refusal written ahead of an answer still owed would stand for that request.
 */
export function clientErrorHandler(limits: ConnectionLimits) {
  return function onClientError(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
    // A parser in error reports again for every chunk that follows: the first answer stands.
    if (answered.has(socket)) return;
    answered.add(socket);
    if (socket.destroyed || !error.code || !(error.code.startsWith('HPE_') || error.code === 'ERR_HTTP_REQUEST_TIMEOUT')) {
      socket.destroy();
      return;
    }
    // Whatever follows is not read; the client gets the answers owed, this one and a FIN.
    stopReading(socket);
    const answer = parserErrorAnswer(error.code, limits);
    this.log.debug({ code: error.code, status: answer.status }, 'client error');
    afterAnswersOwed(socket, () => {
      const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      // Never write into a response already under way: that would corrupt the stream.
      if (!socket.writable || inFlight?.headersSent) {
        socket.destroy();
        return;
      }
      const body = JSON.stringify(envelope(answer.code, answer.message));
      const headers = [
        `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}`,
        'Content-Type: application/json; charset=utf-8',
        `Content-Length: ${Buffer.byteLength(body)}`,
        `Date: ${new Date().toUTCString()}`,
        'Connection: close',
      ];
      socket.write(`${headers.join('\r\n')}\r\n\r\n${body}`);
      endThenClose(socket, limits.unauthenticatedLingerMs);
    });
  };
}

// ---------------------------------------------------------------------------------------
// Body budget

/** Bytes of request bodies held at once, process-wide; large bodies only up to their share. */
export class BodyBudget {
  readonly limits: ConnectionLimits;
  inFlight = 0;
  largeInFlight = 0;
  constructor(limits: ConnectionLimits) {
    this.limits = limits;
  }

  /** Takes `bytes` more for a body whose size becomes `sizeAfter`; false when the budget has no room. */
  take(bytes: number, sizeBefore: number): boolean {
    const sizeAfter = sizeBefore + bytes;
    const large = sizeAfter > this.limits.largeBodyBytes;
    // A body that just became large moves its earlier bytes into the large share.
    const largeMore = large ? (sizeBefore > this.limits.largeBodyBytes ? bytes : sizeAfter) : 0;
    if (this.inFlight + bytes > this.limits.bodyBytesInFlight) return false;
    if (largeMore > 0 && this.largeInFlight + largeMore > this.limits.largeBodyBytesInFlight) return false;
    this.inFlight += bytes;
    this.largeInFlight += largeMore;
    return true;
  }

  give(size: number): void {
    this.inFlight -= size;
    if (size > this.limits.largeBodyBytes) this.largeInFlight -= size;
  }
}

const budgetFull = () => new RelayError(
  'service_unavailable',
  'the server is receiving as many request bodies as it holds at once; retry shortly',
  { retryAfterSeconds: 1 },
);

/** A body of unknown length (chunked): its bytes are taken from the budget as they arrive. */
class MeteredBody extends Transform {
  readonly budget: BodyBudget;
  size = 0;
  receivedEncodedLength = 0;
  constructor(budget: BodyBudget) {
    super();
    this.budget = budget;
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.budget.take(chunk.length, this.size)) return callback(budgetFull());
    this.size += chunk.length;
    this.receivedEncodedLength = this.size;
    callback(null, chunk);
  }
}

const BODYLESS = new Set(['GET', 'HEAD', 'TRACE']);

/** The metered stream of each chunked request: how much of its body was read before a refusal. */
const meteredBodies = new WeakMap<IncomingMessage, MeteredBody>();

function declaredLength(request: FastifyRequest): number | null {
  const raw = request.headers['content-length'];
  if (raw === undefined) return null;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/** Hooks that put the limits into effect on every route registered after them. */
export function installConnectionLimits(app: FastifyInstance, limits: ConnectionLimits, bodyLimit: number): BodyBudget {
  const budget = new BodyBudget(limits);
  budgets.set(app, budget);

  limitPipelining(app.server, { inProgress: limits.requestsInProgress, waiting: limits.requestsWaiting, closeMs: limits.unauthenticatedLingerMs }, tooManyRequests(limits));
  // Node answers 100 Continue before any hook runs unless the server listens for checkContinue:
  // the request is then handled like any other, and 100 goes out when its body is about to be
  // read (continueWhenRead), never ahead of a refusal on its headers. Other expectations are
  // refused in the envelope (onRequest below) rather than by Node's bare 417.
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    continueExpected.add(request);
    app.server.emit('request', request, response);
  });
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    expectationUnmet.add(request);
    app.server.emit('request', request, response);
  });
  const transferCodingRefused = parserErrorAnswer('HPE_INVALID_TRANSFER_ENCODING', limits).message;

  const stop = new StopDrain(app, limits.stopDrainMs);

  app.addHook('preParsing', async (request, reply, payload) => {
    // (A client gone already would never give back what it took: its response 'close' has passed.)
    if (BODYLESS.has(request.method) || reply.raw.destroyed || request.raw.socket?.destroyed) return payload;
    // A body still arriving is read only while the server does not stop; one that is in already is handled.
    const arriving = request.raw.complete === false;
    if (arriving && stop.draining) throw shuttingDown();
    // The route's path parameters and query refuse the request whatever its body: before the
    // body is read, and before 100 Continue (after the key or session, which onRequest checked).
    checkRequestTarget(request);
    // A body in a content coding Relay does not decode would be read as the JSON itself (gzip's
    // bytes refused as "not UTF-8"): 415, naming the coding, with the codings accepted (RFC 9110
    // 15.5.16); here, after the route's key, session and Origin checks, as every refusal of the
    // request itself.
    const coding = contentCodingProblem(request.raw);
    if (coding !== null) {
      reply.header('accept-encoding', 'identity');
      throw new RelayError('unsupported_content_encoding', coding);
    }
    if (arriving) stop.reading(request, reply);
    if (request.headers['transfer-encoding'] === undefined) {
      const declared = declaredLength(request);
      // No body, or one over the limit that fastify refuses without reading it (413).
      if (declared === null || declared === 0 || declared > bodyLimit) return payload;
      if (!budget.take(declared, 0)) throw budgetFull();
      reply.raw.once('close', () => budget.give(declared));
      return continueWhenRead(request, reply, payload);
    }
    const metered = new MeteredBody(budget);
    meteredBodies.set(request.raw, metered);
    reply.raw.once('close', () => budget.give(metered.size));
    payload.on('error', (error) => metered.destroy(error));
    return continueWhenRead(request, reply, payload.pipe(metered));
  });

  app.addHook('onRequest', async (request, reply) => {
    // A request pipelined behind a refused body arrives once that body has been read to its end,
    // on a connection that is closing: its answer could not be written, so it is not run at all.
    if (closing.has(request.raw.socket)) {
      reply.hijack();
      return;
    }
    // (Its connection closes after the answer: onSend, while the server stops.)
    if (stop.draining) throw shuttingDown();
    // Node's parser refuses most other versions itself (clientErrorHandler), but takes HTTP/0.9
    // and HTTP/2.0 request lines: a client that speaks neither 1.0 nor 1.1 is not served either.
    if (request.raw.httpVersionMajor !== 1 || request.raw.httpVersionMinor > 1) {
      reply.header('connection', 'close');
      throw new RelayError('http_version_not_supported', 'request: only HTTP/1.0 and HTTP/1.1 are served');
    }
    // A proxy in front may read another host, or another framing, than Relay does: the
    // request is refused and its connection closed.
    const refusal = hostProblem(request.raw) ?? transferCodingProblem(request.raw, transferCodingRefused);
    if (refusal !== null) {
      reply.header('connection', 'close');
      throw new RelayError('validation_error', refusal);
    }
    if (expectationUnmet.has(request.raw)) {
      reply.header('connection', 'close');
      reply.status(EXPECTATION_FAILED.status).send(envelope(EXPECTATION_FAILED.code, EXPECTATION_FAILED.message));
      return reply;
    }
    // A request no route serves is answered by the not-found handler now, before preParsing:
    // its answer never depends on the body, so the body takes no budget and is not waited for
    // (anyone could otherwise hold the budget with stalled uploads to any path). Returning the
    // reply ends the hook chain once the answer is out.
    if (request.is404) {
      request.routeOptions.handler.call(app, request, reply);
      return reply;
    }
  });

  // A refusal sent before the body is in (401 from the key check, the 404 above, 413, 415, 503
  // above or from a stop, 400 for a media type, a query or an Idempotency-Key) closes the
  // connection after a bounded drain (lingerOf). Every 401 and every answer to a request no
  // route serves closes it: a caller that failed to identify itself, or asked for nothing this
  // API serves, keeps no connection. While the server stops, every answer closes its connection:
  // Node closes only the connections idle when the stop begins.
  app.addHook('onSend', async (request, reply, payload) => {
    // (light-my-request's injected requests have no `complete`: they are always read in full.)
    const unread = request.raw.complete === false;
    const unauthenticated = reply.statusCode === 401 || request.is404;
    if (unread || unauthenticated || stop.draining) reply.header('connection', 'close');
    if (unread) closeAfterResponse(request.raw, lingerOf(limits, request, reply.statusCode, bodyLimit), () => meteredBodies.get(request.raw)?.size ?? 0);
    return payload;
  });

  return budget;
}

// ---------------------------------------------------------------------------------------
// What HTTP/1.1 refuses and Node lets through

/** Requests that asked for 100 Continue (Node's checkContinue), and those with any other expectation (checkExpectation). */
const continueExpected = new WeakSet<IncomingMessage>();
const expectationUnmet = new WeakSet<IncomingMessage>();

/** `body` as the route will read it: 100 Continue goes out when the reading begins, if the client asked for it and still waits. */
function continueWhenRead<T extends NodeJS.ReadableStream>(request: FastifyRequest, reply: FastifyReply, body: T): T {
  if (!continueExpected.has(request.raw) || request.raw.complete) return body;
  body.once('resume', () => {
    // (A refusal already sent may still read and discard the body: closeAfterResponse.)
    if (!reply.raw.headersSent && !reply.raw.destroyed) reply.raw.writeContinue();
  });
  return body;
}

/** Requests whose path parameters and query passed the route's schema before their body was read (checkRequestTarget). */
const targetsChecked = new WeakSet<FastifyRequest>();

/**
 * The route's own checks of its path parameters and query (its schema, as fastify's validation
 * runs them later, the same answers), run before the body is read: a request they refuse is
 * refused whatever its body, so it is answered before the body is uploaded and before any 100
 * Continue (RFC 9110 10.1.1). Throws the route's validation error. The preParsing hook runs it on
 * every route; a route whose onRequest has refusals of its own to make after these (POST
 * /v1/emails: the Idempotency-Key) calls it first, to keep their order.
 */
export function checkRequestTarget(request: FastifyRequest): void {
  if (targetsChecked.has(request)) return;
  for (const part of ['params', 'querystring'] as const) {
    const validate = request.getValidationFunction(part) as unknown as ((data: unknown) => unknown) | undefined;
    if (typeof validate !== 'function') continue;
    const data = part === 'params' ? request.params : request.query;
    // (The validator compiler of apps/api/validation.ts answers {value} or {error}; anything else is left to fastify's own pass.)
    const result = validate(data ?? null) as { error?: unknown } | null;
    if (result !== null && typeof result === 'object' && result.error instanceof Error) throw result.error;
  }
  targetsChecked.add(request);
}

/** What is wrong with a request body's Content-Encoding (RFC 9110 8.4), or null: bodies are read as sent (identity). */
function contentCodingProblem(request: IncomingMessage): string | null {
  const value = request.headers['content-encoding'];
  if (value === undefined || BODYLESS.has(request.method ?? '')) return null;
  // Without a body there is nothing encoded.
  const length = request.headers['content-length'];
  if (request.headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0)) return null;
  const codings = value.split(',').map((coding) => coding.trim().toLowerCase()).filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.length === 0) return null;
  const named = codings.every((coding) => /^[a-z0-9!#$%&'*+.^_`|~-]{1,40}$/.test(coding)) ? codings.join(', ') : 'that content coding';
  return `header Content-Encoding: ${named} is not accepted; send the body uncompressed (Content-Encoding: identity, or none)`;
}

/** RFC 9110 7.2: uri-host [":" port]; uri-host an IP literal, an IPv4 address or a reg-name (RFC 3986 3.2.2), possibly empty. */
export const HOST_VALUE = /^(?:\[(?:[0-9A-Fa-f:.]+|[vV][0-9A-Fa-f]+\.[\w.~!$&'()*+,;=:-]+)\]|(?:[\w.~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?$/;

/** What is wrong with the request's Host (RFC 9112 3.2), or null. Node keeps the first of several lines, so the raw lines are counted. */
function hostProblem(request: IncomingMessage): string | null {
  let lines = 0;
  let value = '';
  const raw = request.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === 4 && raw[i].toLowerCase() === 'host') {
      lines++;
      value = String(raw[i + 1]);
    }
  }
  if (lines > 1) return 'header Host: must be sent once';
  // HTTP/1.0 predates Host: its requests are served without one.
  if (lines === 0) return request.httpVersionMinor === 0 ? null : 'header Host: is required';
  return HOST_VALUE.test(value) ? null : 'header Host: must be a host name or address, with an optional port';
}

/** What is wrong with the request's Transfer-Encoding (RFC 9112 6.1), or null: only chunked alone is decoded. */
function transferCodingProblem(request: IncomingMessage, refused: string): string | null {
  const codings = request.headers['transfer-encoding'];
  if (codings === undefined) return null;
  // An HTTP/1.0 intermediary may have framed it otherwise: its framing cannot be trusted.
  if (request.httpVersionMinor === 0) return 'header Transfer-Encoding: not accepted in an HTTP/1.0 request';
  return codings.trim().toLowerCase() === 'chunked' ? null : refused;
}

/** The answer to a request past a connection's bound (pipelining.ts), written as Node would a handler's. */
function tooManyRequests(limits: ConnectionLimits) {
  const body = JSON.stringify(envelope(
    'service_unavailable',
    `request: a connection may have ${limits.requestsInProgress + limits.requestsWaiting} requests outstanding; read the answers, or retry on a new connection`,
  ));
  return (_request: IncomingMessage, response: ServerResponse): void => {
    response.writeHead(503, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'retry-after': '1',
      connection: 'close',
    }).end(body);
  };
}

// ---------------------------------------------------------------------------------------
// Stopping

const SHUTTING_DOWN = 'the server is shutting down; retry shortly';

const shuttingDown = () => new RelayError('service_unavailable', SHUTTING_DOWN, { retryAfterSeconds: 1 });

/**
 * The API's share of a stop (fastify's preClose, before the server closes). fastify's close
 * waits for every connection Node does not count as idle, and Node counts as busy a connection
 * that has not sent a request yet (a browser's preconnect, a proxy's pre-opened socket: its
 * header deadline runs from the connection) and one whose request body is still arriving: a
 * stop would wait for them until their timeouts (30 s), past its own deadline. So from the stop
 * on, a connection that has not sent its first request is closed; a request still reading its
 * body is answered 503 at once (and closed after the usual linger: closeAfterResponse), and its
 * body never reaches the route; a request already being handled (its body in) finishes with its
 * real answer, on a connection closed after it. Whatever is still open `ms` after the stop began
 * is cut.
 */
class StopDrain {
  draining = false;
  readonly #app: FastifyInstance;
  readonly #ms: number;
  /** Sockets from their connection to their first request (keep-alive ones between requests are Node's idle ones). */
  readonly #beforeFirstRequest = new Set<Socket>();
  /** Requests whose body was still arriving when their parsing began, until their response closes. */
  readonly #reading = new Map<IncomingMessage, FastifyReply>();

  constructor(app: FastifyInstance, ms: number) {
    this.#app = app;
    this.#ms = ms;
    app.server.on('connection', (socket: Socket) => {
      this.#beforeFirstRequest.add(socket);
      socket.once('close', () => this.#beforeFirstRequest.delete(socket));
    });
    app.server.on('request', (request: IncomingMessage) => this.#beforeFirstRequest.delete(request.socket));
    app.addHook('preClose', async () => this.#begin());
  }

  reading(request: FastifyRequest, reply: FastifyReply): void {
    this.#reading.set(request.raw, reply);
    reply.raw.once('close', () => this.#reading.delete(request.raw));
  }

  #begin(): void {
    this.draining = true;
    const { server } = this.#app;
    for (const socket of this.#beforeFirstRequest) socket.destroy();
    for (const [request, reply] of this.#reading) {
      if (request.complete || reply.sent) continue;
      stopParsing(request);
      reply.send(shuttingDown());
    }
    const cut = setTimeout(() => server.closeAllConnections(), this.#ms);
    server.once('close', () => clearTimeout(cut));
  }
}

/**
 * Unhooks fastify's body parser from a request answered before its body is in: the body then
 * never reaches the route (a send it would admit was already told 503), and the parser, which
 * would answer again when the body ends or fails, never does.
 */
function stopParsing(request: IncomingMessage): void {
  const metered = meteredBodies.get(request);
  if (metered) {
    request.unpipe(metered);
    metered.removeAllListeners('data').removeAllListeners('end').removeAllListeners('error').on('error', () => {});
  } else {
    // (An IncomingMessage without 'error' listeners emits none.)
    request.removeAllListeners('data').removeAllListeners('end').removeAllListeners('error');
  }
}

export const limitsOf = (overrides: Partial<ConnectionLimits> = {}): ConnectionLimits => ({ ...DEFAULT_LIMITS, ...overrides });

const budgets = new WeakMap<FastifyInstance, BodyBudget>();

/** The body budget of an API built by buildApi (tests watch it being given back). */
export const bodyBudgetOf = (app: FastifyInstance): BodyBudget | undefined => budgets.get(app);
