// The e-mail routes refuse a query parameter they do not know (INTERFACE-DECISIONS: 400
// validation_error for an unknown query parameter), each the way GET /v1/emails always did: the
// message names the parameter, and a refused send admits nothing.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('unknown query parameters on the e-mail routes');
test.after(() => ref.close());

test('POST /v1/emails?unknown=1: 400 naming query.unknown, nothing admitted', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const response = await h.request('POST', '/v1/emails?unknown=1', { key: t.key.secret, body: basicSend(t), idempotencyKey: 'with-query' });
  expectError(response, 400, 'validation_error', 'query.unknown');
  assert.equal(await h.streamTypes(h.emailIdFor(t.project._id, 'with-query')), []);
  // Without it, the same request is admitted.
  expectAccepted(await h.request('POST', '/v1/emails', { key: t.key.secret, body: basicSend(t), idempotencyKey: 'with-query' }));
});

test('GET /v1/emails/{id}?unknown=1 and GET /v1/emails?unknown=1: 400 naming query.unknown', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const sent = expectAccepted(await h.send(t.key, basicSend(t)));
  await h.projected([sent.id]);
  assert.is((await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).statusCode, 200);
  expectError(await h.request('GET', `/v1/emails/${sent.id}?unknown=1`, { key: t.key.secret }), 400, 'validation_error', 'query.unknown');
  expectError(await h.request('GET', '/v1/emails?unknown=1', { key: t.key.secret }), 400, 'validation_error', 'query.unknown');
});

test.run();
