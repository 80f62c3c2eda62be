// Defect: a request line ended by a bare LF (`GET /healthz HTTP/1.1\n`) was answered `505
// http_version_not_supported`, "only HTTP/1.0 and HTTP/1.1 are served": the version is
// HTTP/1.1, and the client is told to change what is right. llhttp reports both a version it
// does not take (HTTP/1.2) and a request line that does not end right after its version (a
// bare LF, a space, `HTTP/1.10`) as HPE_INVALID_VERSION; only its reason ("Invalid HTTP
// version" vs "Expected CRLF after version", "Expected dot") tells them apart. A request line
// whose version is no `HTTP/…` (`HTTX/1.1`) was called "a header line is malformed", and a
// header line ended by a bare LF "not valid HTTP/1.1 framing".
//
// Correct (apps/api/INTERFACE-DECISIONS.md, Error codes): 400 validation_error in the envelope,
// its message naming the request line or the header line and CRLF; a well-formed version that
// is not served stays 505. Answered after the answers owed, connection closed, like every
// refusal of Node's parser.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { answerOf, exchange, head } from './support/raw-http.ts';

interface Fixture { t: TestApp; port: number }

const test = suite<Fixture>('request and header lines that do not end with CRLF');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
});

test.after(async (f) => {
  await f.t.close();
});

/** What is wrong with the answer to `raw`: null when it is `status` with `code`, a message matching `message`, and the connection closed. */
async function problemOf(port: number, raw: string, status: number, code: string, message: RegExp): Promise<string | null> {
  const { received, closed } = await exchange(port, raw);
  if (received === '') return 'no answer';
  const answer = answerOf(received);
  let body: { error?: { code?: string; message?: string } } = {};
  try {
    body = JSON.parse(answer.body);
  } catch { /* reported below */ }
  const got = `${answer.status} ${body.error?.code} "${body.error?.message ?? answer.body.slice(0, 100)}"`;
  if (answer.status !== status || body.error?.code !== code || !message.test(body.error?.message ?? '')) return got;
  if (!closed || answer.headers.connection !== 'close') return `${got}, connection left open`;
  return null;
}

const REQUEST_LINE = /request line is malformed.*CRLF.*bare LF/;

test('a request line ended by a bare LF, or otherwise not ended right after HTTP/1.x, is 400 naming the request line', async (f) => {
  const cases: Array<[string, string]> = [
    ['a bare LF after the request line', 'GET /healthz HTTP/1.1\nHost: x\r\nConnection: close\r\n\r\n'],
    ['bare LFs throughout', 'GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n'],
    ['a bare LF after an HTTP/1.0 request line', 'GET /healthz HTTP/1.0\n\n'],
    ['a bare CR after the request line', 'GET /healthz HTTP/1.1\rHost: x\r\n\r\n'],
    ['a space after the version', head(['GET /healthz HTTP/1.1 ', 'Host: x'])],
    ['a version of three digits', head(['GET /healthz HTTP/1.10', 'Host: x'])],
    ['a version without its dot', head(['GET /healthz HTTP/11', 'Host: x'])],
    ['a version that is no HTTP/', head(['GET /healthz HTTX/1.1', 'Host: x'])],
  ];
  const failures: string[] = [];
  for (const [label, raw] of cases) {
    const problem = await problemOf(f.port, raw, 400, 'validation_error', REQUEST_LINE);
    if (problem) failures.push(`${label}: ${problem}`);
  }
  assert.equal(failures, []);
});

test('a header line ended by a bare LF is 400 naming the header line and CRLF', async (f) => {
  const problem = await problemOf(f.port, 'GET /healthz HTTP/1.1\r\nHost: x\nConnection: close\r\n\r\n', 400, 'validation_error', /header line.*CRLF.*bare LF/);
  assert.is(problem, null);
});

test('a well-formed version that is not served stays 505; a bare LF pipelined behind a request is refused after its answer', async (f) => {
  // Reference: what only the version is wrong with.
  assert.is(await problemOf(f.port, head(['GET /healthz HTTP/1.2', 'Host: x']), 505, 'http_version_not_supported', /only HTTP\/1\.0 and HTTP\/1\.1/), null);
  const { received, closed } = await exchange(f.port, `${head(['GET /healthz HTTP/1.1', 'Host: x'])}GET /healthz HTTP/1.1\nHost: x\r\n\r\n`);
  const first = answerOf(received);
  assert.is(first.status, 200);
  const second = answerOf(received.slice(received.indexOf(first.body) + first.body.length));
  assert.is(second.status, 400);
  assert.match(JSON.parse(second.body).error.message, REQUEST_LINE);
  assert.ok(closed);
});

test.run();
