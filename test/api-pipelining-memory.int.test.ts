// Defect: a client that pipelines many requests on one connection and reads none of the
// answers makes the server build and hold every answer in memory. Node parses every request
// of each chunk it reads, fastify runs all of them at once, and each answer waits in the
// queue of its connection, fully rendered, until the ones before it are written; the socket
// is only paused after the chunk. Nothing in apps/api/connection-limits.ts bounds the
// requests outstanding on one connection (the body budget bounds request bodies only).
//
// Why it matters: without any credentials, 3,000 `GET /v1/openapi.json` (about 120 KB sent)
// make one connection hold about 230 MB of answers (78 KB each) until the idle timeout cuts it
// (30 s); a handful of such connections exhaust the heap of the API process, and rendering
// them holds the event loop for seconds. The limits module promises to bound "what one client
// can hold on to: ... memory"; the process-wide budget for all request bodies is 64 MiB.
//
// Correct behaviour: bound the requests a connection may have outstanding (e.g. stop reading,
// or answer 503 in the envelope and close, past a few dozen), so that a connection that
// does not read holds a bounded amount of memory whatever it sends (RFC 9112 9.3.2 lets a
// server close a connection carrying pipelined requests it will not answer).
import { connect, type Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { waitUntil } from './support/eventually.ts';

const MiB = 1024 * 1024;
const REQUESTS = 3_000;
/** What one connection that reads nothing may make the server hold: the budget of all request bodies together. */
const BOUND = 64 * MiB;

interface Fixture { t: TestApp; port: number }

const test = suite<Fixture>('pipelined requests that are never read');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
});

test.after(async (f) => {
  await f.t.close();
});

test(`${REQUESTS} pipelined GET /v1/openapi.json never read: the server holds at most 64 MiB for them`, async (f) => {
  const size = (await (await fetch(`${f.t.url}/v1/openapi.json`)).arrayBuffer()).byteLength;
  assert.ok(size > 20_000, `the document is ${size} bytes`);

  // Every request the server takes from our connection, and every answer it has finished
  // building (queued behind the ones the client does not read).
  let serverSocket: Socket | null = null;
  const responses: ServerResponse[] = [];
  const onRequest = (request: IncomingMessage, response: ServerResponse) => {
    if (request.socket === serverSocket) responses.push(response);
  };
  // (An answer queued behind unwritten ones is ended, not finished.)
  const built = () => responses.filter((response) => response.writableEnded).length;
  const onConnection = (socket: Socket) => { serverSocket ??= socket; };
  f.t.app.server.prependListener('connection', onConnection);
  f.t.app.server.prependListener('request', onRequest);

  const baseline = process.memoryUsage().heapUsed;
  let peak = baseline;
  const sample = setInterval(() => { peak = Math.max(peak, process.memoryUsage().heapUsed); }, 10);
  const client = connect(f.port, '127.0.0.1');
  client.pause(); // reads nothing
  client.on('error', () => {});
  try {
    client.write('GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(REQUESTS));
    // The server closes the connection, or stops reading it (backpressure from the unread
    // answers, or a bound of its own) and has built the answer of every request it took.
    await waitUntil(() => serverSocket !== null && (serverSocket.destroyed || (serverSocket.isPaused() && responses.length > 0 && built() === responses.length)),
      'the server closed or stopped reading the connection, and built every answer it owes', 60_000);
    peak = Math.max(peak, process.memoryUsage().heapUsed);
    const held = peak - baseline;
    assert.ok(held <= BOUND,
      `one connection that sent ${REQUESTS} requests (${Math.round(REQUESTS * 42 / 1024)} KiB) and read nothing made the server ` +
      `take ${responses.length} of them and hold ${Math.round(held / MiB)} MiB of answers (bound: ${BOUND / MiB} MiB)`);
  } finally {
    clearInterval(sample);
    client.destroy();
    f.t.app.server.off('connection', onConnection);
    f.t.app.server.off('request', onRequest);
  }
});

test.run();
