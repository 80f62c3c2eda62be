// Defect: when a pipelined request that Node's parser refuses (a malformed header line, headers
// over 16 KiB) follows a request still being handled, Relay's clientErrorHandler writes its
// 400/431 straight onto the socket and closes it, ahead of the answer still owed to the
// earlier request. It only checks that the in-flight response has not *begun*
// (`headersSent`), not that one is still owed (apps/api/connection-limits.ts, onClientError).
//
// Why it matters: HTTP/1.1 answers pipelined requests strictly in order (RFC 9112 9.3.2: a
// server "MUST send the corresponding responses in the same order that the requests were
// received"), so the client reads the error as the answer to its first request. Here that
// request is a send: the email is admitted (and charged, and delivered) while the client was
// told `400 validation_error` (or `431 headers_too_large`), a permanent refusal it will not
// retry, or will resend without its Idempotency-Key. Its real 202 is never written.
//
// Correct behaviour: answer every request received before the bad one first (in order), then
// the refusal in the envelope, then close; or close without any answer for the bad one.
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { commitHoldSwitch } from './support/commit-hold.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { deferred } from './support/eventually.ts';
import { answerOf, head } from './support/raw-http.ts';

interface Fixture { t: TestApp; tenant: DeliveryTenant; port: number }

const holds = commitHoldSwitch();
const test = suite<Fixture>('a refused pipelined request never answers for the one before it');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true, commitHold: holds.hold });
  f.port = Number(new URL(f.t.url!).port);
  f.tenant = await deliveryTenant(f.t);
});

test.after(async (f) => {
  holds.set(null);
  await f.t.close();
});

const refusedSeconds: Array<[string, string, number]> = [
  ['a malformed header line', head(['GET /healthz HTTP/1.1', 'Host: x', 'Bad Header: y']), 400],
  ['headers over 16 KiB', head([`GET /v1/emails?cursor=${'a'.repeat(20_000)} HTTP/1.1`, 'Host: x']), 431],
];

for (const [label, second, secondStatus] of refusedSeconds) {
  test(`a send followed by a pipelined request with ${label}: the client reads the send's 202 first`, async (f) => {
    const idempotencyKey = `pipelined-${secondStatus}`;
    const body = JSON.stringify({ from: `app@${f.tenant.domain}`, to: 'someone@example.org', subject: 'Hi', text: 'Hello' });
    const send = head([
      'POST /v1/emails HTTP/1.1', 'Host: x', `Authorization: Bearer ${f.tenant.key}`, 'Content-Type: application/json',
      `Idempotency-Key: ${idempotencyKey}`, `Content-Length: ${Buffer.byteLength(body)}`,
    ]) + body;

    // The send is held in flight at its first commit, so its answer is certainly still owed
    // when the second request arrives.
    const held = deferred();
    const release = deferred();
    holds.set(async () => {
      held.resolve();
      await release.promise;
    });
    const secondRefused = deferred();
    const onClientError = () => secondRefused.resolve();
    f.t.app.server.prependListener('clientError', onClientError);

    const socket = connect(f.port, '127.0.0.1');
    let raw = '';
    socket.setEncoding('latin1').on('data', (d: string) => (raw += d)).on('error', () => {});
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    try {
      socket.write(send);
      await held.promise;
      socket.write(second);
      // The server has read and refused the second request (its clientError handler ran).
      await secondRefused.promise;
      holds.set(null);
      release.resolve();
      // The server closes the connection after the refusal (within its 1 s drain).
      await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error(`never closed; got ${raw.slice(0, 300)}`)), 10_000))]);
    } finally {
      holds.set(null);
      release.resolve();
      f.t.app.server.off('clientError', onClientError);
      socket.destroy();
    }

    // The send was admitted: a replay of it says so, with its id.
    const replay = await fetch(`${f.t.url}/v1/emails`, {
      method: 'POST', body,
      headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    });
    assert.is(replay.status, 202);
    const { id } = await replay.json() as { id: string };

    const first = answerOf(raw);
    assert.is(first.status, 202,
      `the first answer on the connection is what the client takes as the send's; it reads ${first.status} ${first.body} ` +
      `although ${id} was admitted`);
    assert.is(JSON.parse(first.body).id, id);
    // (The refusal of the second request may follow it.)
    const rest = raw.slice(raw.indexOf(first.body) + first.body.length);
    if (rest !== '') assert.is(answerOf(rest).status, secondStatus);
  });
}

test.run();
