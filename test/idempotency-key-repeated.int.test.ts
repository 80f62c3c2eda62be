// Two Idempotency-Key fields on one request (a client that sets its own while a gateway adds
// another, or a bug) name no single key: 400 validation_error, nothing admitted. Node's HTTP
// parser joins repeated fields of a name it has no rule for with ", ", and "client-key-1,
// gateway-key-9" is a valid key of its own, which neither attempt that carries one of them would
// match: the client's retry with its own key would admit a second email.
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { answerOf, head } from './support/raw-http.ts';
import { basicSend, expectAccepted, harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('a request with two Idempotency-Key fields');
test.after(() => ref.close());

function rawPost(url: string, lines: string[], body: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let raw = '';
    socket.on('data', (d) => (raw += d));
    socket.on('end', () => resolve(raw));
    socket.on('error', reject);
    socket.write(head([...lines, `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close']) + body);
  });
}

for (const [second, name] of [['Idempotency-Key', 'spelled alike'], ['idempotency-KEY', 'in another case']] as const) {
  test(`${name}: 400 validation_error, nothing admitted under the merged key, and the client's retry admits its one email`, async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const body = JSON.stringify(basicSend(t, { subject: `two keys ${name}` }));
    const answer = answerOf(await rawPost(h.instances[0].url!, [
      'POST /v1/emails HTTP/1.1', 'Host: relay.test', `Authorization: Bearer ${t.key.secret}`, 'Content-Type: application/json',
      'Idempotency-Key: client-key-1', `${second}: gateway-key-9`,
    ], body));
    assert.equal(await h.streamTypes(h.emailIdFor(t.project._id, 'client-key-1, gateway-key-9')), [], `admitted under the merged key (${answer.status} ${answer.body})`);
    assert.is(answer.status, 400, answer.body);
    const { error } = JSON.parse(answer.body);
    assert.is(error.code, 'validation_error');
    assert.match(error.message, 'Idempotency-Key');
    const retry = expectAccepted(await h.send(t.key, JSON.parse(body), { idempotencyKey: 'client-key-1' }));
    assert.equal(await h.streamTypes(retry.id), ['EmailAccepted']);
    assert.is(retry.id, h.emailIdFor(t.project._id, 'client-key-1'));
  });
}

test('one field: the key as sent', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const body = JSON.stringify(basicSend(t, { subject: 'one key' }));
  const answer = answerOf(await rawPost(h.instances[0].url!, [
    'POST /v1/emails HTTP/1.1', 'Host: relay.test', `Authorization: Bearer ${t.key.secret}`, 'Content-Type: application/json',
    'idempotency-key: only-key',
  ], body));
  assert.is(answer.status, 202, answer.body);
  assert.is(JSON.parse(answer.body).id, h.emailIdFor(t.project._id, 'only-key'));
});

test.run();
