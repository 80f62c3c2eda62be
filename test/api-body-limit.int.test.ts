// A body over the 10 MiB limit is answered 413 message_too_large in the spec's envelope, and
// the client actually reads that answer: Node's fetch (undici), curl, node:http and a client
// that reads nothing before it has sent its whole body, with a Content-Length and chunked.
// The server reads and discards the rest of a refused body, within bounds: a body announced
// beyond the bound is not read, an endless one stops being read at the bound, a slow one is
// cut off at the deadline (lingerBytes, lingerMs in apps/api/connection-limits.ts), and a
// request pipelined behind a refused body is not run.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { FastifyInstance } from 'fastify';
import { fetch as undiciFetch } from 'undici';
import { bodyBudgetOf } from '../apps/api/connection-limits.ts';
import { buildApi } from '../apps/api/server.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { waitUntil } from './support/eventually.ts';
import { answerOf, head } from './support/raw-http.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const OVER = 11 * MiB;

/** Bounds small enough to reach in a test: 2 MiB past the limit, 1.5 s. */
const BOUNDED = { lingerBytes: 12 * MiB, lingerMs: 1_500 };

interface Fixture {
  t: TestApp;
  tenant: DeliveryTenant;
  /** The API with the production limits. */
  url: string;
  port: number;
  bounded: FastifyInstance;
  boundedPort: number;
  /** The bounded API's server-side sockets, by the client's port: what the server read. */
  boundedSockets: Map<number, Socket>;
}


/** 'ok' for a 413 in the envelope with message_too_large, else what came instead. */
function verdict(status: number, body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown } };
    const ok = status === 413 && Object.keys(parsed).join() === 'error' && parsed.error?.code === 'message_too_large'
      && typeof parsed.error.message === 'string' && parsed.error.message.length > 0;
    return ok ? 'ok' : `${status} ${body.slice(0, 120)}`;
  } catch {
    return `${status} (not JSON) ${body.slice(0, 120)}`;
  }
}

const failureOf = (error: unknown) => {
  const e = error as Error & { code?: string; cause?: Error & { code?: string } };
  return `${e.code ?? ''} ${e.message}${e.cause ? ` (${e.cause.code ?? ''} ${e.cause.message})` : ''}`;
};


/** `bytes` of blanks as chunks of 64 KiB in chunked encoding, with the last chunk. */
function chunkedBody(bytes: number): Buffer {
  const parts: Buffer[] = [];
  for (let left = bytes; left > 0; left -= 64 * KiB) {
    const n = Math.min(64 * KiB, left);
    parts.push(Buffer.from(`${n.toString(16)}\r\n`), Buffer.alloc(n, 0x20), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** A fetch body of `bytes` blanks with no length known up front (sent chunked). */
function streamOf(bytes: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= bytes) return controller.close();
      const n = Math.min(64 * KiB, bytes - sent);
      sent += n;
      controller.enqueue(new Uint8Array(n).fill(0x20));
    },
  });
}

interface Exchange {
  raw: string;
  /** The server closed (FIN or reset) before the wait ended. */
  closed: boolean;
  error: string | null;
  /** The client's port (to find the server's side of the connection). */
  localPort: number;
}

/**
 * Like most HTTP clients outside Node: sends the request whole, and only then reads. The
 * socket reads nothing until `request` has been handed to the kernel in full.
 */
function sendThenRead(port: number, request: Buffer, waitMs = 20_000): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => (localPort = socket.localPort ?? 0));
    socket.pause();
    let raw = '';
    let error: string | null = null;
    let localPort = 0;
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ raw, closed, error, localPort });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('error', (e) => { error = e.message; finish(true); });
    socket.write(request, (e) => {
      if (e) return;
      socket.setEncoding('latin1');
      socket.on('data', (d: string) => (raw += d));
      socket.on('end', () => finish(true));
      socket.resume();
    });
  });
}

/**
 * Half-open (the server's FIN after its answer does not end what the client sends): `send`
 * starts writing once connected and may return what stops it. Resolves once the server closes
 * (FIN or reset) or after `waitMs`.
 */
function halfOpenExchange(port: number, waitMs: number, send: (socket: Socket, ended: () => boolean) => (() => void) | void): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let raw = '';
    let error: string | null = null;
    let localPort = 0;
    let settled = false;
    let stop: (() => void) | void;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stop?.();
      socket.destroy();
      resolve({ raw, closed, error, localPort });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (raw += d));
    socket.on('close', () => finish(true));
    socket.on('error', (e) => { error = e.message; finish(true); });
    socket.on('connect', () => {
      localPort = socket.localPort ?? 0;
      stop = send(socket, () => settled);
    });
  });
}

const emailHead = (tenant: DeliveryTenant, framing: string) => head([
  'POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${tenant.key}`, 'Content-Type: application/json', framing,
]);

const curlMissing = await promisify(execFile)('curl', ['--version']).then(() => undefined, () => 'curl is not installed');

const test = suite<Fixture>('413 that clients read');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.url = f.t.url!;
  f.port = Number(new URL(f.url).port);
  f.tenant = await deliveryTenant(f.t);
  f.bounded = await buildApi(f.t.ctx, { logLevel: false, limits: BOUNDED });
  f.boundedSockets = new Map();
  f.bounded.server.on('connection', (s: Socket) => f.boundedSockets.set(s.remotePort ?? 0, s));
  f.boundedPort = Number(new URL(await f.bounded.listen({ host: '127.0.0.1', port: 0 })).port);
});

test.after(async (f) => {
  await f.bounded?.close();
  await f.t?.close();
});

// ---------------------------------------------------------------------------------------
// Every client gets the answer (production limits)

for (const [name, doFetch] of [['Node\'s fetch', globalThis.fetch], ['undici\'s fetch', undiciFetch as unknown as typeof fetch]] as const) {
  test(`11 MiB with ${name}, with a Content-Length and chunked: 413 in the envelope 20 times out of 20 each`, async (f) => {
    const body = Buffer.alloc(OVER, 0x20);
    const outcomes: Record<string, string[]> = { 'content-length': [], chunked: [] };
    for (const framing of ['content-length', 'chunked'] as const) {
      for (let i = 0; i < 20; i++) {
        try {
          const response = await doFetch(`${f.url}/v1/emails`, {
            method: 'POST',
            headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json' },
            ...(framing === 'chunked' ? { body: streamOf(OVER), duplex: 'half' } : { body }),
          } as RequestInit);
          outcomes[framing].push(verdict(response.status, await response.text()));
        } catch (error) {
          outcomes[framing].push(failureOf(error));
        }
      }
    }
    assert.equal(outcomes['content-length'].filter((o) => o !== 'ok'), [], 'with a Content-Length');
    assert.equal(outcomes.chunked.filter((o) => o !== 'ok'), [], 'chunked');
  });
}

test('11 MiB with node:http, with a Content-Length and chunked: 413 in the envelope, Connection: close', async (f) => {
  for (const chunked of [false, true]) {
    const outcome = await new Promise<{ status: number; connection: string; body: string }>((resolve, reject) => {
      const req = httpRequest(`${f.url}/v1/emails`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': OVER }) },
      }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d)).on('end', () => resolve({ status: res.statusCode ?? 0, connection: String(res.headers.connection), body }));
      });
      req.on('error', reject);
      if (chunked) {
        const piece = Buffer.alloc(64 * KiB, 0x20);
        for (let sent = 0; sent < OVER; sent += piece.length) req.write(piece);
        req.end();
      } else {
        req.end(Buffer.alloc(OVER, 0x20));
      }
    }).catch((error) => ({ status: 0, connection: '', body: failureOf(error) }));
    assert.is(verdict(outcome.status, outcome.body), 'ok', chunked ? 'chunked' : 'content-length');
    assert.is(outcome.connection.toLowerCase(), 'close');
  }
});

test('a client that reads only after sending all 11 MiB gets the 413 (Content-Length and chunked)', async (f) => {
  const requests = {
    'content-length': Buffer.concat([Buffer.from(emailHead(f.tenant, `Content-Length: ${OVER}`)), Buffer.alloc(OVER, 0x20)]),
    chunked: Buffer.concat([Buffer.from(emailHead(f.tenant, 'Transfer-Encoding: chunked')), chunkedBody(OVER)]),
  };
  for (const [framing, request] of Object.entries(requests)) {
    const x = await sendThenRead(f.port, request);
    assert.is(x.error, null, `${framing}: the client saw ${x.error} instead of the answer`);
    const answer = answerOf(x.raw);
    assert.is(verdict(answer.status, answer.body), 'ok', framing);
    assert.is(answer.headers.connection?.toLowerCase(), 'close', framing);
    assert.ok(x.closed, `${framing}: the connection stayed open`);
  }
});

test('any route: an 11 MiB sign-in body is 413 in the envelope too', async (f) => {
  const response = await fetch(`${f.url}/v1/session`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.alloc(OVER, 0x20),
  });
  assert.is(verdict(response.status, await response.text()), 'ok');
});

test('the 413 states the limit of the route that refused: 10 MiB for a send, 16 KiB for a sign-in', async (f) => {
  const messageOf = async (path: string, bytes: number, headers: Record<string, string> = {}) => {
    const response = await fetch(`${f.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ email: 'a@b.test', password: 'x'.repeat(bytes) }) });
    const text = await response.text();
    assert.is(verdict(response.status, text), 'ok', path);
    return (JSON.parse(text) as { error: { message: string } }).error.message;
  };
  assert.is(await messageOf('/v1/session', 20_000), 'the request body exceeds 16 KiB');
  assert.is(await messageOf('/v1/emails', OVER, { authorization: `Bearer ${f.tenant.key}` }), 'the request body exceeds 10 MiB');
});

// ---------------------------------------------------------------------------------------
// Reading what follows a refusal stays bounded (BOUNDED: 12 MiB in all, 1.5 s)

/** What the server side of the connection from `localPort` read, headers included. */
function serverRead(f: Fixture, localPort: number): number {
  const socket = f.boundedSockets.get(localPort);
  assert.ok(socket, `no server socket for client port ${localPort}`);
  return socket.bytesRead;
}

test('an endless chunked body stops being read at the bound and its connection is closed', async (f) => {
  const chunk = Buffer.concat([Buffer.from(`${(64 * KiB).toString(16)}\r\n`), Buffer.alloc(64 * KiB, 0x20), Buffer.from('\r\n')]);
  let written = 0;
  // Unbounded reading would go on for as long as the client sends: it never stops on its own.
  const x = await halfOpenExchange(f.boundedPort, 15_000, (socket, ended) => {
    const pump = () => {
      while (!ended() && socket.writable) {
        written += chunk.length;
        if (!socket.write(chunk)) return;
      }
    };
    socket.on('drain', pump);
    socket.write(emailHead(f.tenant, 'Transfer-Encoding: chunked'));
    pump();
  });
  assert.ok(x.closed, 'the server never closed a connection that kept sending');
  const answer = answerOf(x.raw);
  assert.is(verdict(answer.status, answer.body), 'ok');
  // 12 MiB of body, the chunk framing around it and the request head; at most a read more.
  const read = serverRead(f, x.localPort);
  assert.ok(read < 12 * MiB + 64 * KiB + 200 * KiB, `the server read ${read} bytes of an endless body (bound: 12 MiB)`);
  assert.ok(written > read, 'the client was not sending more than the server read');
  await waitUntil(() => bodyBudgetOf(f.bounded)?.inFlight === 0, 'the body budget is whole again', 5_000);
});

test('a body announced beyond the bound is not read at all, and its client still gets the 413', async (f) => {
  const x = await halfOpenExchange(f.boundedPort, 15_000, (socket) => {
    socket.write(emailHead(f.tenant, `Content-Length: ${100 * MiB}`));
    socket.write(Buffer.alloc(100 * MiB, 0x20));
  });
  assert.ok(x.closed, 'the connection stayed open');
  const answer = answerOf(x.raw);
  assert.is(verdict(answer.status, answer.body), 'ok');
  const read = serverRead(f, x.localPort);
  assert.ok(read < 2 * MiB, `the server read ${read} bytes of a body it refused for its announced length`);
});

test('a send pipelined behind a refused body is not run (its answer could never be written)', async (f) => {
  const send = (subject: string) => JSON.stringify({ from: `app@${f.tenant.domain}`, to: 'someone@example.org', subject, text: 'Hello' });
  const pipelined = send('pipelined');
  let localPort = 0;
  const raw = await new Promise<string>((resolve) => {
    const socket = connect(f.boundedPort, '127.0.0.1', () => {
      localPort = socket.localPort ?? 0;
      socket.write(Buffer.concat([
        Buffer.from(emailHead(f.tenant, 'Transfer-Encoding: chunked')),
        chunkedBody(OVER),
        Buffer.from(head([
          'POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json',
          'Idempotency-Key: pipelined-behind-413', `Content-Length: ${Buffer.byteLength(pipelined)}`,
        ]) + pipelined),
      ]));
    });
    let raw = '';
    socket.setEncoding('latin1').on('data', (d: string) => (raw += d)).on('error', () => {}).on('close', () => resolve(raw));
  });
  assert.is(verdict(answerOf(raw).status, answerOf(raw).body), 'ok');
  assert.is(raw.match(/HTTP\/1\.1 /g)?.length, 1, 'a second answer came on a closing connection');
  await waitUntil(() => f.boundedSockets.get(localPort)?.destroyed === true, 'the server closed the connection', 5_000);
  // Had the pipelined send been admitted, its key would now be taken by another body (409).
  const response = await fetch(`${f.url}/v1/emails`, {
    method: 'POST', body: send('sent on its own'),
    headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json', 'idempotency-key': 'pipelined-behind-413' },
  });
  assert.is(response.status, 202, await response.text());
});

test('a refused body that trickles in is cut off at the deadline', async (f) => {
  // The body is within the byte bound (11 of 12 MiB) and would take 18 minutes at this pace.
  const x = await halfOpenExchange(f.boundedPort, 10_000, (socket) => {
    socket.write(emailHead(f.tenant, `Content-Length: ${OVER}`));
    const drip = setInterval(() => socket.write(Buffer.alloc(KiB, 0x20)), 100);
    return () => clearInterval(drip);
  });
  assert.ok(x.closed, 'a refused body trickling in kept its connection open');
  const answer = answerOf(x.raw);
  assert.is(verdict(answer.status, answer.body), 'ok');
});

test.run();

// ---------------------------------------------------------------------------------------
// curl (skipped where it is not installed)

const withCurl = skippableSuite<{ t: TestApp; tenant: DeliveryTenant; dir: string }>('413 that curl reads', curlMissing);

withCurl.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.tenant = await deliveryTenant(f.t);
  f.dir = mkdtempSync(join(tmpdir(), 'relay-body-limit-'));
  writeFileSync(join(f.dir, 'body.json'), Buffer.alloc(OVER, 0x20));
});

withCurl.after(async (f) => {
  await f.t?.close();
  if (f.dir) rmSync(f.dir, { recursive: true, force: true });
});

withCurl('11 MiB with curl, with a Content-Length and chunked: 413 in the envelope', async (f) => {
  for (const framing of [[], ['-H', 'Transfer-Encoding: chunked']]) {
    // execFile, not execFileSync: the server answering curl runs on this event loop.
    const { stdout } = await promisify(execFile)('curl', [
      '-sS', '--max-time', '60', '-o', '-', '-w', '\n%{http_code}',
      '-H', `Authorization: Bearer ${f.tenant.key}`, '-H', 'Content-Type: application/json', ...framing,
      '--data-binary', `@${join(f.dir, 'body.json')}`, `${f.t.url}/v1/emails`,
    ], { maxBuffer: MiB });
    const at = stdout.lastIndexOf('\n');
    assert.is(verdict(Number(stdout.slice(at + 1)), stdout.slice(0, at)), 'ok', framing.join(' ') || 'content-length');
  }
});

withCurl.run();
