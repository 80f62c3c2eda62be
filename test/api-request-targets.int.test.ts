// Defects in how the API took request targets other than a plain path (RFC 9112 3.2). Node's
// parser lets through a path, an absolute URI, anything that begins with `*`, and CONNECT's
// authority; fastify's router takes the first character of a target for the `/`, and a `#` for
// the start of a query. So:
//
// 1. `GET *` (asterisk-form, only for OPTIONS: RFC 9112 3.2.4) was answered with the dashboard's
//    page, `GET *healthz` with /healthz; `OPTIONS *`, which asks about the server as a whole
//    (RFC 9110 9.3.7), was 404 "no route for OPTIONS *".
// 2. A fragment was read as a query: `/v1/workspaces#limt=1` was refused for an unknown query
//    parameter `limt`, and `/healthz#x` served. A client never sends a fragment.
// 3. An absolute-form target (`GET http://host/path`, which a server MUST accept: 3.2.2) routes
//    as its path, but its authority, which stands for Host, went unchecked: `http://user@host/…`
//    was served (RFC 9110 4.2.4: treat userinfo as an error), and an empty host (4.2.1: MUST
//    reject) was blamed on "the URL is not valid percent-encoded UTF-8".
// 4. CONNECT (a tunnel) got no answer at all: Node drops the connection when no one listens for
//    it, and with it the answers owed to the requests pipelined before it.
//
// Correct (apps/api/INTERFACE-DECISIONS.md, Request targets): 400 validation_error for the
// targets no route may serve, naming the target; OPTIONS * 200 with Allow and no body; absolute
// form routed as its path once its authority passes; CONNECT 404 not_found after the answers
// owed; each in the envelope, connection closed.
//
// Also tried, and right already (no route, 404): `//v1/emails`, `/v1/%2e%2e/healthz`,
// `/v1%2femails`, `/healthz%00`; a raw NUL or `%2fhealthz` is refused by Node's parser (400).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { newCaller, type Caller } from './support/management.ts';
import { answerOf, exchange, head, type Answer } from './support/raw-http.ts';

interface Fixture { t: TestApp; port: number; owner: Caller }

const test = suite<Fixture>('request targets');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
  f.owner = await newCaller(f.t, 'owner@example.com');
});

test.after(async (f) => {
  await f.t.close();
});

interface Sent { answer: Answer; closed: boolean; error: { code?: string; message?: string } | null }

async function send(port: number, raw: string): Promise<Sent> {
  const { received, closed } = await exchange(port, raw);
  if (received === '') return { answer: { status: 0, headers: {}, body: '' }, closed, error: null };
  const answer = answerOf(received);
  let error = null;
  try {
    error = (JSON.parse(answer.body) as { error?: Sent['error'] }).error ?? null;
  } catch { /* not JSON */ }
  return { answer, closed, error };
}

const describe = ({ answer, error }: Sent) => answer.status === 0
  ? 'no answer, connection closed'
  : `${answer.status} ${error ? `${error.code} "${error.message}"` : JSON.stringify(answer.body.slice(0, 60))}`;

/** The request line of a request with Host and Connection: close. */
const request = (line: string, ...more: string[]) => head([line, 'Host: relay.example', ...more, 'Connection: close']);

/** What is wrong with a refusal: null when it is 400 validation_error, its message matching `message`, connection closed. */
function refusalProblem(sent: Sent, message: RegExp, method = 'GET'): string | null {
  if (sent.answer.status !== 400) return describe(sent);
  // (A HEAD answer has no body.)
  if (method !== 'HEAD' && (sent.error?.code !== 'validation_error' || !message.test(sent.error.message ?? ''))) return describe(sent);
  if (!sent.closed || sent.answer.headers.connection !== 'close') return `${describe(sent)}, connection left open`;
  return null;
}

test('* with any method but OPTIONS, and a target that begins with * or anything but /, are 400 validation_error', async (f) => {
  const cases: Array<[string, string]> = [
    ['GET', request('GET * HTTP/1.1')],
    ['HEAD', request('HEAD * HTTP/1.1')],
    ['POST', request('POST * HTTP/1.1', 'Content-Type: application/json', 'Content-Length: 2') + '{}'],
    ['DELETE', request('DELETE * HTTP/1.1')],
    ['GET', request('GET *healthz HTTP/1.1')],
    ['GET', request('GET *?a=1 HTTP/1.1')],
  ];
  const failures: string[] = [];
  for (const [method, raw] of cases) {
    const problem = refusalProblem(await send(f.port, raw), /target/, method);
    if (problem) failures.push(`${raw.split('\r\n')[0]}: ${problem}`);
  }
  assert.equal(failures, []);
});

test('OPTIONS * (and OPTIONS http://host, as a proxy forwards it) is 200 with Allow and no body', async (f) => {
  const failures: string[] = [];
  for (const line of ['OPTIONS * HTTP/1.1', 'OPTIONS http://relay.example HTTP/1.1']) {
    const sent = await send(f.port, request(line));
    const allow = (sent.answer.headers.allow ?? '').split(/,\s*/);
    const wrong = sent.answer.status !== 200 || sent.answer.headers['content-length'] !== '0' || sent.answer.body !== ''
      || !['GET', 'HEAD', 'POST', 'PATCH', 'DELETE', 'OPTIONS'].every((method) => allow.includes(method));
    if (wrong) failures.push(`${line}: ${describe(sent)}, Allow: ${sent.answer.headers.allow}`);
  }
  // HTTP/1.0 asks the same.
  const old = await send(f.port, head(['OPTIONS * HTTP/1.0']));
  if (old.answer.status !== 200) failures.push(`OPTIONS * HTTP/1.0: ${describe(old)}`);
  assert.equal(failures, []);
});

test('a target with a fragment is 400 naming it, never a query', async (f) => {
  const failures: string[] = [];
  const cases = [
    request('GET /healthz#top HTTP/1.1'),
    request('GET /v1/workspaces#limt=1 HTTP/1.1', `Cookie: ${f.owner.cookie}`),
    request('GET /v1/workspaces?#x HTTP/1.1', `Cookie: ${f.owner.cookie}`),
    request('GET http://relay.example/healthz#top HTTP/1.1'),
  ];
  for (const raw of cases) {
    const problem = refusalProblem(await send(f.port, raw), /fragment/);
    if (problem) failures.push(`${raw.split('\r\n')[0]}: ${problem}`);
  }
  assert.equal(failures, []);
});

test('an absolute-form target routes as its path and query; its authority is checked as Host is', async (f) => {
  const failures: string[] = [];
  const served: Array<[string, number, (sent: Sent) => boolean]> = [
    [request('GET http://relay.example/healthz HTTP/1.1'), 200, (s) => s.answer.body === '{"status":"ok"}'],
    [request('GET HTTPS://relay.example:8443/healthz HTTP/1.1'), 200, (s) => s.answer.body === '{"status":"ok"}'],
    [request('GET http://[::1]:3000/healthz HTTP/1.1'), 200, (s) => s.answer.body === '{"status":"ok"}'],
    [request('GET http://relay.example/v1/workspaces HTTP/1.1', `Cookie: ${f.owner.cookie}`), 200, (s) => s.answer.body === '{"workspaces":[]}'],
    [request('GET http://relay.example/v1/workspaces?limt=1 HTTP/1.1', `Cookie: ${f.owner.cookie}`), 400, (s) => /query\.limt/.test(s.error?.message ?? '')],
  ];
  for (const [raw, status, right] of served) {
    const sent = await send(f.port, raw);
    if (sent.answer.status !== status || !right(sent)) failures.push(`${raw.split('\r\n')[0]}: ${describe(sent)}`);
  }
  const refused: Array<[string, RegExp]> = [
    [request('GET http://user@relay.example/healthz HTTP/1.1'), /user information/],
    [request('GET http://user:secret@relay.example/v1/workspaces HTTP/1.1', `Cookie: ${f.owner.cookie}`), /user information/],
    [request('GET http:///healthz HTTP/1.1'), /must name a host/],
    [request('GET http://relay.example:http/healthz HTTP/1.1'), /must name a host/],
  ];
  for (const [raw, message] of refused) {
    const problem = refusalProblem(await send(f.port, raw), message);
    if (problem) failures.push(`${raw.split('\r\n')[0]}: ${problem}`);
  }
  assert.equal(failures, []);
});

test('CONNECT is 404 not_found in the envelope, after the answer owed to the request pipelined before it', async (f) => {
  const alone = await send(f.port, request('CONNECT relay.example:443 HTTP/1.1'));
  assert.is(describe(alone), '404 not_found "no route for CONNECT relay.example:443: this server is no proxy and opens no tunnel"');
  assert.ok(alone.closed && alone.answer.headers.connection === 'close');

  const { received, closed } = await exchange(f.port, head(['GET /healthz HTTP/1.1', 'Host: relay.example']) + head(['CONNECT relay.example:443 HTTP/1.1', 'Host: relay.example:443']));
  assert.ok(received !== '', 'an answer');
  const first = answerOf(received);
  assert.equal([first.status, first.body], [200, '{"status":"ok"}']);
  const second = answerOf(received.slice(received.indexOf(first.body) + first.body.length));
  assert.is(second.status, 404);
  assert.is(JSON.parse(second.body).error.code, 'not_found');
  assert.ok(closed);
});

test.run();
