// What a client can hold on to, over real sockets: Node's own refusals (malformed request
// lines, header overflow, bad framing) answered in the spec's envelope; header, request and
// keep-alive timeouts; a 401 sent before the body is read, on a closed connection; the
// process-wide budget of body bytes in flight (503 when full); and a 413 that a client still
// sending its body actually receives. Timeouts and budgets are shrunk through buildApi's
// `limits` so that nothing waits for the production figures (apps/api/connection-limits.ts).
import { connect, type Socket } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { FastifyInstance } from 'fastify';
import { Agent, fetch } from 'undici';
import { bodyBudgetOf } from '../apps/api/connection-limits.ts';
import { httpStatusOf } from '../apps/api/error-registry.ts';
import { buildApi } from '../apps/api/server.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { answerOf, head, type Answer } from './support/raw-http.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Small figures: every bound is reached within a second. */
const FAST = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 700,
  keepAliveTimeoutMs: 200,
  idleTimeoutMs: 5_000,
  lingerMs: 400,
  unauthenticatedLingerMs: 200,
  bodyBytesInFlight: 4 * MiB,
  largeBodyBytes: 256 * KiB,
  largeBodyBytesInFlight: 3 * MiB,
};

interface Fixture {
  t: TestApp;
  tenant: DeliveryTenant;
  /** The API with the production limits (t.url). */
  port: number;
  fast: FastifyInstance;
  fastPort: number;
}

interface Exchange {
  /** Everything the server sent until it closed (or the wait ended). */
  raw: string;
  closed: boolean;
  /** ms from connect to the server's close (FIN or reset), if it closed. */
  closedAfterMs: number | null;
  error: string | null;
}

/**
 * Connects, lets `write` send whatever it likes (and keep the socket open, stalled), and
 * collects the server's bytes until the server closes or `waitMs` passes.
 */
function exchange(port: number, write: (socket: Socket) => void, waitMs = 3_000): Promise<Exchange> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => write(socket));
    let raw = '';
    let error: string | null = null;
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ raw, closed, closedAfterMs: closed ? Date.now() - started : null, error });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (raw += d));
    socket.on('end', () => finish(true));
    socket.on('error', (e) => { error = e.message; finish(true); });
    socket.on('close', () => finish(true));
  });
}


/** Asserts the spec's envelope with a registry code; returns the code. */
function envelopeCode(answer: Answer, what: string): string {
  let parsed: { error?: { code?: unknown; message?: unknown } };
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    return assert.unreachable(`${what}: body is not JSON: ${answer.body.slice(0, 200)}`) as never;
  }
  assert.equal(Object.keys(parsed), ['error'], `${what}: ${answer.body}`);
  const { code, message } = parsed.error ?? {};
  assert.ok(typeof code === 'string' && code in httpStatusOf, `${what}: unknown code ${String(code)}`);
  assert.ok(typeof message === 'string' && message.length > 0, `${what}: empty message`);
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/, what);
  return code as string;
}

const sendBody = (tenant: DeliveryTenant, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ from: `app@${tenant.domain}`, to: 'someone@example.org', subject: 'Hi', text: 'Hello', ...extra });


const limits = suite<Fixture>('connection limits');

limits.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
  f.tenant = await deliveryTenant(f.t);
  f.fast = await buildApi(f.t.ctx, { logLevel: false, limits: FAST });
  f.fastPort = Number(new URL(await f.fast.listen({ host: '127.0.0.1', port: 0 })).port);
});

limits.after(async (f) => {
  await f.fast.close();
  await f.t.close();
});

// ---------------------------------------------------------------------------------------
// Node's parser: every refusal in the envelope, with Connection: close, then closed

limits('requests Node cannot parse are answered in the envelope with Connection: close, and closed', async (f) => {
  const cases: Array<[string, string, number, string]> = [
    ['malformed request line', 'GARBAGE\r\n\r\n', 400, 'validation_error'],
    ['control character in the request target', 'GET /health\x01z HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'validation_error'],
    ['invalid header name', head(['GET /healthz HTTP/1.1', 'Host: x', 'Bad Header: y']), 400, 'validation_error'],
    ['header without a colon', head(['GET /healthz HTTP/1.1', 'Host: x', 'NoColonHere']), 400, 'validation_error'],
    ['20 KB URL', head([`GET /v1/emails?q=${'a'.repeat(20_000)} HTTP/1.1`, 'Host: x']), 431, 'headers_too_large'],
    ['100 KB of headers', head(['GET /healthz HTTP/1.1', 'Host: x', ...Array.from({ length: 100 }, (_, i) => `X-Pad-${i}: ${'p'.repeat(1_000)}`)]), 431, 'headers_too_large'],
    ['non-numeric Content-Length', head(['POST /v1/session HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Content-Length: abc']) + '{}', 400, 'validation_error'],
    ['two different Content-Lengths', head(['POST /v1/session HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Content-Length: 2', 'Content-Length: 3']) + '{}', 400, 'validation_error'],
    ['Content-Length with Transfer-Encoding', head(['POST /v1/session HTTP/1.1', 'Host: x', 'Content-Length: 2', 'Transfer-Encoding: chunked']) + '2\r\n{}\r\n0\r\n\r\n', 400, 'validation_error'],
    ['unsupported Transfer-Encoding', head(['POST /v1/session HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Transfer-Encoding: gzip']) + '{}', 400, 'validation_error'],
    ['malformed chunk size', head(['POST /v1/session HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Transfer-Encoding: chunked']) + 'ZZ\r\n{}\r\n0\r\n\r\n', 400, 'validation_error'],
    ['unknown HTTP version', head(['GET /healthz HTTP/3.7', 'Host: x']), 505, 'http_version_not_supported'],
  ];
  const failures: string[] = [];
  for (const [label, raw, status, code] of cases) {
    const x = await exchange(f.port, (s) => s.write(raw));
    try {
      const answer = answerOf(x.raw);
      assert.is(answer.status, status, `${label}: ${x.raw.slice(0, 200)}`);
      assert.is(envelopeCode(answer, label), code, label);
      if (status === 400) assert.is(code, 'validation_error');
      assert.is(answer.headers.connection?.toLowerCase(), 'close', `${label}: Connection header`);
      assert.ok(x.closed, `${label}: the server kept the connection open`);
      assert.is(x.error, null, `${label}: the client saw ${x.error} (the answer may be lost to a reset)`);
    } catch (error) {
      failures.push(`${label}: ${(error as Error).message}`);
    }
  }
  assert.equal(failures, []);
});

limits('a body on a GET with bad JSON is not parsed: the route answers, in the envelope when it refuses', async (f) => {
  const junk = (auth: string[]) => head(['GET /v1/emails HTTP/1.1', 'Host: x', ...auth, 'Content-Type: application/json', 'Content-Length: 5', 'Connection: close']) + '{bad}';
  const anonymous = answerOf((await exchange(f.port, (s) => s.write(junk([])))).raw);
  assert.is(anonymous.status, 401);
  assert.is(envelopeCode(anonymous, 'GET with junk body, no key'), 'invalid_api_key');
  const keyed = answerOf((await exchange(f.port, (s) => s.write(junk([`Authorization: Bearer ${f.tenant.key}`])))).raw);
  assert.is(keyed.status, 200, keyed.body);
  assert.ok(Array.isArray(JSON.parse(keyed.body).emails));
});

// ---------------------------------------------------------------------------------------
// Authentication before the body; a failed caller keeps no connection

limits('a request without a valid key is answered 401 before its body is read, and its connection is closed', async (f) => {
  for (const auth of [[], ['Authorization: Bearer rr_test_nope']]) {
    const x = await exchange(f.port, (s) => {
      // 10 MiB announced, 9 bytes sent: a server that read the body first would never answer.
      s.write(head(['POST /v1/emails HTTP/1.1', 'Host: x', ...auth, 'Content-Type: application/json', `Content-Length: ${10 * MiB}`]));
      s.write('{"from":"');
    });
    const answer = answerOf(x.raw);
    assert.is(answer.status, 401, x.raw.slice(0, 300));
    assert.is(envelopeCode(answer, '401'), 'invalid_api_key');
    assert.is(answer.headers.connection?.toLowerCase(), 'close');
    // Not kept alive: the body within the route's limit would be discarded, but a caller that
    // failed to identify itself is cut once 1 s passes without a byte of it.
    assert.ok(x.closed && x.closedAfterMs! < 2_500, `still open after the 401 (${JSON.stringify(x)})`);
  }
});

limits('keep-alive callers that fail authentication are disconnected after the 401', async (f) => {
  const results = await Promise.all(Array.from({ length: 50 }, () => exchange(f.port, (s) => {
    s.write(head(['GET /v1/emails HTTP/1.1', 'Host: x', 'Authorization: Bearer wrong', 'Connection: keep-alive']));
  })));
  for (const x of results) {
    assert.is(answerOf(x.raw).status, 401);
    assert.ok(x.closed, 'a 401 keep-alive connection stayed open');
  }
});

// ---------------------------------------------------------------------------------------
// Timeouts (small figures through buildApi's limits)

limits('a connection that never finishes its headers gets 408 in the envelope and is closed', async (f) => {
  const silent = await exchange(f.fastPort, () => {});
  const partial = await exchange(f.fastPort, (s) => s.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: '));
  for (const [label, x] of [['silent', silent], ['partial headers', partial]] as const) {
    assert.ok(x.closed, `${label}: still open after 3 s`);
    assert.ok(x.closedAfterMs! < 2_000, `${label}: closed after ${x.closedAfterMs} ms`);
    if (x.raw !== '') {
      const answer = answerOf(x.raw);
      assert.is(answer.status, 408, label);
      assert.is(envelopeCode(answer, label), 'request_timeout');
      assert.is(answer.headers.connection?.toLowerCase(), 'close');
    }
  }
  assert.is(answerOf(partial.raw).status, 408);
});

limits('an authenticated upload that stalls is cut at the request timeout (408, closed) and gives its budget back', async (f) => {
  const budgetBefore = await largeUploadsAdmitted(f);
  const x = await exchange(f.fastPort, (s) => {
    s.write(head(['POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json', `Content-Length: ${2 * MiB}`]));
    s.write(Buffer.alloc(2 * MiB - KiB, 0x20));
  });
  assert.ok(x.closed, 'a stalled upload was never closed');
  assert.ok(x.closedAfterMs! < 2_500, `closed only after ${x.closedAfterMs} ms`);
  const answer = answerOf(x.raw);
  assert.is(answer.status, 408, x.raw.slice(0, 300));
  assert.is(envelopeCode(answer, 'request timeout'), 'request_timeout');
  // Its bytes are given back once its socket is gone (after the short drain): as many large uploads fit as before.
  await waitUntil(() => bodyBudgetOf(f.fast)?.inFlight === 0, 'the body budget is whole again', 2_000);
  assert.is(await largeUploadsAdmitted(f), budgetBefore);
});

limits('an idle keep-alive connection is closed after the keep-alive timeout', async (f) => {
  const x = await exchange(f.fastPort, (s) => s.write(head(['GET /healthz HTTP/1.1', 'Host: x'])), 5_000);
  const answer = answerOf(x.raw);
  assert.is(answer.status, 200);
  assert.match(answer.headers['keep-alive'] ?? '', /timeout=0/); // 200 ms, advertised in whole seconds
  // 200 ms plus Node's 1 s grace for clients racing the close.
  assert.ok(x.closed && x.closedAfterMs! < 2_500, `idle keep-alive connection open for ${x.closedAfterMs ?? '> 5000'} ms`);
});

// ---------------------------------------------------------------------------------------
// Body budget

/** Opens stalled large uploads until one is refused; returns how many were admitted (and closes them all). */
async function largeUploadsAdmitted(f: Fixture): Promise<number> {
  const sockets: Socket[] = [];
  try {
    for (let admitted = 0; admitted < 50; admitted++) {
      const takenBefore = bodyBudgetOf(f.fast)?.inFlight ?? 0;
      const refusal = await new Promise<string | null>((resolve) => {
        const s = connect(f.fastPort, '127.0.0.1', () => {
          s.write(head(['POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json', `Content-Length: ${MiB}`]));
          s.write('{"from":"');
        });
        sockets.push(s);
        let raw = '';
        s.setEncoding('latin1').on('data', (d: string) => (raw += d)).on('error', () => {});
        // Admitted uploads hear nothing (they are waiting for their body) and take their declared
        // size from the body budget; a refusal comes at once.
        const admittedNow = waitUntil(() => (bodyBudgetOf(f.fast)?.inFlight ?? 0) >= takenBefore + MiB, 'the upload is admitted', 5_000).then(() => null);
        const refused = new Promise<string>((done) => s.on('data', () => { if (raw.includes('\r\n\r\n')) done(raw); }));
        Promise.race([admittedNow, refused]).then(resolve, () => resolve(raw));
      });
      if (refusal !== null) {
        const answer = answerOf(refusal);
        assert.is(answer.status, 503, refusal.slice(0, 300));
        assert.is(envelopeCode(answer, 'budget full'), 'service_unavailable');
        assert.is(answer.headers['retry-after'], '1');
        assert.is(answer.headers.connection?.toLowerCase(), 'close');
        return admitted;
      }
    }
    throw new Error('50 stalled 1 MiB uploads were all admitted: no budget');
  } finally {
    for (const s of sockets) s.destroy();
    await waitUntil(() => bodyBudgetOf(f.fast)?.inFlight === 0, 'the probes gave their budget back', 2_000);
  }
}

limits('large bodies in flight are bounded: the next one is 503 service_unavailable, small sends still pass', async (f) => {
  const sockets: Socket[] = [];
  try {
    // 3 MiB for large bodies: three stalled 1 MiB uploads fill it.
    for (let i = 0; i < 3; i++) {
      const s = connect(f.fastPort, '127.0.0.1');
      s.on('error', () => {});
      s.write(head(['POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json', `Content-Length: ${MiB}`]));
      s.write('{"from":"');
      sockets.push(s);
    }
    await waitUntil(() => (bodyBudgetOf(f.fast)?.inFlight ?? 0) >= 3 * MiB, 'the three stalled uploads are admitted', 5_000);
    const refused = await exchange(f.fastPort, (s) => {
      s.write(head(['POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json', `Content-Length: ${MiB}`]));
      s.write(Buffer.alloc(MiB, 0x20)); // a client that keeps sending still gets the answer
    });
    const answer = answerOf(refused.raw);
    assert.is(answer.status, 503, refused.raw.slice(0, 300));
    assert.is(envelopeCode(answer, '503'), 'service_unavailable');
    assert.is(answer.headers['retry-after'], '1');
    assert.is(answer.headers.connection?.toLowerCase(), 'close');
    assert.ok(refused.closed);
    // A chunked body (no length announced) is counted as it arrives: refused once it grows large.
    const chunked = await exchange(f.fastPort, (s) => {
      s.write(head(['POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked']));
      const chunk = Buffer.alloc(64 * KiB, 0x20);
      for (let i = 0; i < 8; i++) s.write(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`);
    });
    assert.is(answerOf(chunked.raw).status, 503, chunked.raw.slice(0, 300));
    // An ordinary send is not large: it finds room.
    const small = await fetch(`http://127.0.0.1:${f.fastPort}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json' }, body: sendBody(f.tenant),
    });
    assert.is(small.status, 202, await small.text());
  } finally {
    for (const s of sockets) s.destroy();
  }
});

// ---------------------------------------------------------------------------------------
// 413 to a client that keeps sending

limits('an 11 MiB body sent with undici fetch gets the 413 envelope, not EPIPE (20 times)', async (f) => {
  const body = Buffer.alloc(11 * MiB, 0x20);
  const dispatcher = new Agent({ connections: 4 });
  try {
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      try {
        const response = await fetch(`${f.t.url}/v1/emails`, {
          method: 'POST', dispatcher, body,
          headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json' },
        });
        const text = await response.text();
        outcomes.push(response.status === 413 && JSON.parse(text).error?.code === 'message_too_large' ? 'ok' : `${response.status} ${text.slice(0, 100)}`);
      } catch (error) {
        const cause = (error as Error & { cause?: Error }).cause;
        outcomes.push(`${(error as Error).message}: ${cause?.message ?? ''}`);
      }
    }
    assert.equal(outcomes.filter((o) => o !== 'ok'), []);
  } finally {
    await dispatcher.close();
  }
});

limits.run();
