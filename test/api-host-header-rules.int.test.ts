// Defects in how the API takes the Host header (RFC 9112 3.2: "A server MUST respond with a
// 400 (Bad Request) status code to any HTTP/1.1 request message that lacks a Host header
// field and to any request message that contains more than one Host header field line or a
// Host header field with an invalid field value").
//
// 1. Two Host lines, or a Host that is no host (`a b/c@d`), are served: Node keeps the first
//    Host and drops the rest, and nothing in Relay checks. Relay routes nothing on Host, but a
//    proxy in front may (by the last line, or by a value it parses otherwise), which is the
//    desynchronisation the MUST exists to prevent. Correct: 400 validation_error in the
//    envelope, as for the other requests Node's parser refuses.
// 2. A request without Host is refused by Node itself (requireHostHeader), with an empty
//    body: not the envelope every error carries (INTERFACE-DECISIONS.md: "Every error is
//    {error: {code, message}}", and "400 validation_error also [for] requests Node's HTTP
//    parser refuses"). Correct: the same 400 validation_error naming Host, Connection: close.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { answerOf, exchange, head } from './support/raw-http.ts';

interface Fixture { t: TestApp; port: number }

const test = suite<Fixture>('Host');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
});

test.after(async (f) => {
  await f.t.close();
});

/** The body of a response, chunked or not. */
function bodyOf(raw: string): string {
  const answer = answerOf(raw);
  if (answer.headers['transfer-encoding'] !== 'chunked') return answer.body;
  let rest = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  let body = '';
  for (;;) {
    const size = parseInt(rest, 16);
    if (!(size > 0)) return body;
    const start = rest.indexOf('\r\n') + 2;
    body += rest.slice(start, start + size);
    rest = rest.slice(start + size + 2);
  }
}

const refusedInEnvelope = (raw: string): string | null => {
  const answer = answerOf(raw);
  if (answer.status !== 400) return `${answer.status} ${bodyOf(raw).slice(0, 100)}`;
  try {
    const parsed = JSON.parse(bodyOf(raw)) as { error?: { code?: string; message?: string } };
    if (parsed.error?.code === 'validation_error' && typeof parsed.error.message === 'string' && parsed.error.message !== '') return null;
  } catch { /* reported below */ }
  return `400 with body ${JSON.stringify(bodyOf(raw))}, not the envelope`;
};

test('two Host lines, or a Host that is no host, are 400 validation_error', async (f) => {
  const failures: string[] = [];
  const cases: Array<[string, string[]]> = [
    ['two Host lines', ['Host: a.example', 'Host: b.example']],
    ['a Host of spaces and slashes', ['Host: a b/c@d']],
  ];
  for (const [label, hosts] of cases) {
    const problem = refusedInEnvelope((await exchange(f.port, head(['GET /healthz HTTP/1.1', ...hosts, 'Connection: close']))).received);
    if (problem) failures.push(`${label}: ${problem}`);
  }
  assert.equal(failures, []);
});

test('an HTTP/1.1 request without Host is 400 validation_error in the envelope', async (f) => {
  const problem = refusedInEnvelope((await exchange(f.port, head(['GET /healthz HTTP/1.1', 'Connection: close']))).received);
  assert.is(problem, null);
});

test.run();
