// A request no route serves is answered 404 as soon as its headers are in, without its body
// being read (apps/api/INTERFACE-DECISIONS.md, "Nobody without credentials gets a body
// parsed"). It used to take its announced Content-Length from the process-wide body budget
// and wait for its body (or the 30 s request timeout) before answering, so a handful of
// anonymous stalled uploads to any unknown path filled the budget and authenticated sends got
// 503 service_unavailable. It is closed as a 401 is: Connection: close, and the rest of its
// body drained within the unauthenticated bounds (64 KiB, 1 s), whatever the method.
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { FastifyInstance } from 'fastify';
import { fetch } from 'undici';
import { bodyBudgetOf } from '../apps/api/connection-limits.ts';
import { buildApi } from '../apps/api/server.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { answerOf, head, type Answer } from './support/raw-http.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
/** The production figures shrunk (as test/api-connection-limits.int.test.ts does): 4 MiB in flight; the drains as in production. */
const SMALL = { bodyBytesInFlight: 4 * MiB, largeBodyBytes: 256 * KiB, largeBodyBytesInFlight: 3 * MiB };

const test = suite<{ t: TestApp; tenant: DeliveryTenant; api: FastifyInstance; port: number }>('requests no route serves, before their bodies');

test.before(async (f) => {
  f.t = await startTestApp();
  f.tenant = await deliveryTenant(f.t);
  f.api = await buildApi(f.t.ctx, { logLevel: false, limits: SMALL });
  f.port = Number(new URL(await f.api.listen({ host: '127.0.0.1', port: 0 })).port);
});
test.after(async (f) => {
  await f.api.close();
  await f.t.close();
});

interface Stalled {
  /** The response, once it is complete; null if none came within the wait. */
  answer: Promise<Answer | null>;
  /** ms from connect to the server's FIN; null if none came within the wait. */
  endedAfterMs: Promise<number | null>;
  /** ms from connect to the connection being gone (closed or reset); null if it was still there after the wait. */
  goneAfterMs: Promise<number | null>;
  destroy(): void;
}

/**
 * A client that sends a request head and the start of its body, then stalls, never closing its
 * side (allowHalfOpen: a FIN from the server does not end it): only the server can end it.
 * With `trickle`, it sends one more byte of body every 100 ms, so a server that has closed the
 * connection answers with a reset and one that still reads does not.
 */
function stalled(port: number, lines: string[], bodyStart: string, waitMs: number, trickle = false): Stalled {
  const started = Date.now();
  let ticker: NodeJS.Timeout | undefined;
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => {
    socket.write(head(lines) + bodyStart);
    if (trickle) ticker = setInterval(() => socket.write(' '), 100);
  });
  socket.on('error', () => {});
  socket.on('close', () => clearInterval(ticker));
  let raw = '';
  socket.setEncoding('latin1');
  const within = <T>(register: (resolve: (value: T | null) => void) => void) => new Promise<T | null>((resolve) => {
    const timer = setTimeout(() => resolve(null), waitMs);
    register((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
  const answer = within<Answer>((resolve) => socket.on('data', (d: string) => {
    raw += d;
    const end = raw.indexOf('\r\n\r\n');
    if (end === -1) return;
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(raw.slice(0, end))?.[1] ?? 0);
    if (raw.length - end - 4 >= length || lines[0].startsWith('HEAD ')) resolve(answerOf(raw));
  }));
  const endedAfterMs = within<number>((resolve) => socket.once('end', () => resolve(Date.now() - started)));
  const goneAfterMs = within<number>((resolve) => socket.once('close', () => resolve(Date.now() - started)));
  return {
    answer, endedAfterMs, goneAfterMs,
    destroy: () => {
      clearInterval(ticker);
      socket.destroy();
    },
  };
}

/** What is wrong with `answer` as the 404 to `method path`, or null. */
function notFoundProblem(answer: Answer | null, method: string, path: string): string | null {
  if (!answer) return `${method} ${path}: no answer while its body was still to come`;
  if (answer.status !== 404) return `${method} ${path}: ${answer.status} ${answer.body}`;
  if (answer.headers.connection?.toLowerCase() !== 'close') return `${method} ${path}: Connection: ${answer.headers.connection}`;
  if (method === 'HEAD') return null;
  const expected = JSON.stringify({ error: { code: 'not_found', message: `no route for ${method} ${path}` } });
  return answer.body === expected ? null : `${method} ${path}: ${answer.body}`;
}

test('stalled anonymous uploads to paths no route serves are answered 404 at once, take no body budget, and lock no send out', async (f) => {
  // Each announces 256 KiB (not a "large" body) and sends 5 bytes: sixteen of them would take the
  // whole 4 MiB. Every method that carries a body, and a path served for another method.
  const methods = ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
  const requests = Array.from({ length: 16 }, (_, i) => (i === 0
    ? { method: 'PUT', path: '/v1/emails' }
    : { method: methods[i % methods.length], path: `/v1/no-such-route-${i}` }));
  // A method fastify does not route at all.
  requests.push({ method: 'PROPFIND', path: '/v1/no-such-route-propfind' });
  const clients = requests.map(({ method, path }) => stalled(f.port, [
    `${method} ${path} HTTP/1.1`, 'Host: x', 'Content-Type: application/json', `Content-Length: ${256 * KiB}`,
  ], '{"a":', 3_000));
  // A chunked body announces nothing: it is not read either.
  const chunked = stalled(f.port, ['POST /v1/no-such-route-chunked HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Transfer-Encoding: chunked'], '5\r\n{"a":\r\n', 3_000);
  try {
    const answers = await Promise.all(clients.map((c) => c.answer));
    const held = bodyBudgetOf(f.api)?.inFlight ?? 0;
    const response = await fetch(`http://127.0.0.1:${f.port}/v1/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: `app@${f.tenant.domain}`, to: 'someone@example.org', subject: 'Hi', text: 'x'.repeat(KiB) }),
    });
    const text = await response.text();
    assert.is(response.status, 202, `an authenticated send was refused while requests to unknown routes held ${held} bytes of the body budget: ${response.status} ${text}`);
    assert.is(held, 0, 'requests no route serves held body budget');
    const problems = requests.map(({ method, path }, i) => notFoundProblem(answers[i], method, path));
    problems.push(notFoundProblem(await chunked.answer, 'POST', '/v1/no-such-route-chunked'));
    assert.equal(problems.filter(Boolean), []);
  } finally {
    for (const c of [...clients, chunked]) c.destroy();
  }
});

test('whatever the method, bodyless ones included, a 404 with a body to come is closed within the unauthenticated drain', async (f) => {
  // Announced within the 64 KiB the drain reads after a 401, and sent a byte at a time: the
  // server reads it until it ends the connection, after a 401 within 1 s (10 s after the
  // refusals of an authenticated request).
  const cases = ['GET', 'HEAD', 'POST', 'DELETE', 'PROPFIND'].map((method) => ({
    method,
    path: `/v1/nothing-here-${method.toLowerCase()}`,
  }));
  const clients = cases.map(({ method, path }) => stalled(f.port, [
    `${method} ${path} HTTP/1.1`, 'Host: x', 'Content-Type: application/json', `Content-Length: ${32 * KiB}`,
  ], '{"a":', 4_000, true));
  try {
    const answers = await Promise.all(clients.map((c) => c.answer));
    const gone = await Promise.all(clients.map((c) => c.goneAfterMs));
    const problems = cases.flatMap(({ method, path }, i) => [
      notFoundProblem(answers[i], method, path),
      gone[i] !== null && gone[i]! < 2_500 ? null : `${method}: the server ${gone[i] === null ? 'still read the body after 4 s' : `closed the connection only after ${gone[i]} ms`}`,
    ]);
    assert.equal(problems.filter(Boolean), []);
  } finally {
    for (const c of clients) c.destroy();
  }
});

test('a complete request no route serves is answered 404 in the envelope and keeps no connection', async (f) => {
  const client = stalled(f.port, ['GET /v1/nothing-here HTTP/1.1', 'Host: x', 'Connection: keep-alive'], '', 3_000);
  try {
    assert.is(notFoundProblem(await client.answer, 'GET', '/v1/nothing-here'), null);
    assert.ok(await client.endedAfterMs !== null, 'the server kept the connection open after the 404');
  } finally {
    client.destroy();
  }
});

test.run();
