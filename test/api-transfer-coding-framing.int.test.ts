// Defects in how the API takes request framing it should refuse (request smuggling shapes,
// RFC 9112 6.1 and 7). Node's parser lets both through and nothing in Relay looks again
// (apps/api/connection-limits.ts reads only whether Transfer-Encoding is present).
//
// 1. A transfer coding Relay does not implement, before `chunked`, is ignored: `Transfer-
//    Encoding: gzip, chunked` (or `x-unknown, chunked`) with a plain JSON body is a 202, the
//    bytes taken as JSON as if the gzip coding were not there, while `Transfer-Encoding: gzip`
//    alone is refused ("header Transfer-Encoding: only chunked is supported", the rule
//    INTERFACE-DECISIONS.md states). RFC 9112 6.1: "A server that receives a request message
//    with a transfer coding it does not understand SHOULD respond with 501 (Not
//    Implemented)". A client that really gzips gets a misleading "body is not UTF-8", and a
//    proxy in front that applies or checks the coding sees another body than Relay admits.
//    Correct: the same refusal as for `gzip` alone, for any list holding a coding other than
//    chunked.
//
// 2. An HTTP/1.0 request with Transfer-Encoding is served on a connection kept open
//    (`Connection: keep-alive`). RFC 9112 6.1: a server "that receives an HTTP/1.0 message
//    containing a Transfer-Encoding header field MUST treat the message as if the framing is
//    faulty, even if a Content-Length is present, and close the connection after processing
//    the message" (an HTTP/1.0 intermediary may have framed it otherwise, and what it kept
//    back would be read as the next request). Correct: answer (or refuse) it with
//    `Connection: close`, then close.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { answerOf, exchange, head } from './support/raw-http.ts';

interface Fixture { t: TestApp; tenant: DeliveryTenant; port: number }

const test = suite<Fixture>('transfer codings');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
  f.tenant = await deliveryTenant(f.t);
});

test.after(async (f) => {
  await f.t.close();
});

const sendBody = (f: Fixture) => JSON.stringify({ from: `app@${f.tenant.domain}`, to: 'someone@example.org', subject: 'Hi', text: 'Hello' });
const chunked = (body: string) => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
const sendHead = (f: Fixture, version: string, extra: string[]) => head([
  `POST /v1/emails ${version}`, 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json', ...extra,
]);

test('a transfer coding other than chunked is refused also when chunked follows it', async (f) => {
  const body = sendBody(f);
  const alone = answerOf((await exchange(f.port, sendHead(f, 'HTTP/1.1', ['Transfer-Encoding: gzip']) + chunked(body))).received);
  assert.is(alone.status, 400);
  const expected = JSON.parse(alone.body);
  const failures: string[] = [];
  for (const codings of ['gzip, chunked', 'x-unknown, chunked']) {
    const answer = answerOf((await exchange(f.port, sendHead(f, 'HTTP/1.1', [`Transfer-Encoding: ${codings}`, 'Connection: close']) + chunked(body))).received);
    if (answer.status !== alone.status || JSON.stringify(JSON.parse(answer.body)) !== JSON.stringify(expected)) {
      failures.push(`Transfer-Encoding: ${codings}: ${answer.status} ${answer.body}`);
    }
  }
  assert.equal(failures, [], `expected ${alone.status} ${alone.body}`);
});

test('an HTTP/1.0 request with Transfer-Encoding is answered with Connection: close, and its connection closed', async (f) => {
  const x = await exchange(f.port, sendHead(f, 'HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: chunked']) + chunked(sendBody(f)));
  const answer = answerOf(x.received);
  assert.is(answer.headers.connection?.toLowerCase(), 'close', `answered ${answer.status} with Connection: ${answer.headers.connection}`);
  assert.ok(x.closed, 'the connection was kept open');
});

test.run();
