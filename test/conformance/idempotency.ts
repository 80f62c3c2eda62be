// Spec: Idempotency-Key (1 to 128 printable ASCII characters, scoped to the project), States
// (a replay returns the original id and admission result even after processing advanced, and
// adds no monthly usage), rule 5 (a different body is 409 idempotency_conflict), Limits rule 3
// (replays count toward the request rate). Concurrent requests with one key admit one email.
import { randomUUID } from 'node:crypto';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

export function idempotencySuite(test: Test, ref: HarnessRef): void {
  test('keys of 1 and 128 printable ASCII characters (space to tilde) are accepted', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const key of ['k', ' ', '~'.repeat(128), ' !"#$%&\'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~']) {
      expectAccepted(await h.send(t.key, basicSend(t, { subject: `key ${key.length}` }), { idempotencyKey: key }));
    }
  });

  test('an empty key, 129 characters or characters outside space..tilde are validation_errors', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const key of ['', 'k'.repeat(129), 'tab\there', 'del\x7f', 'nul\x00', 'é']) {
      expectError(await h.send(t.key, basicSend(t), { idempotencyKey: key }), 400, 'validation_error', 'Idempotency-Key');
    }
  });

  test('the same key and body replays the original id and result, with no second event and no added usage', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const key = randomUUID();
    const body = basicSend(t, { cc: t.to('cc'), bcc: t.to('bcc') });
    const first = expectAccepted(await h.send(t.key, body, { idempotencyKey: key }));
    assert.equal((await t.usage()).workspace, 3);
    const again = await h.send(t.key, body, { idempotencyKey: key });
    assert.is(again.statusCode, 202);
    assert.equal(again.json(), first);
    assert.equal(await h.streamTypes(first.id), ['EmailAccepted']);
    assert.equal((await t.usage()).workspace, 3, 'a replay adds no monthly usage');
  });

  test('the body is compared as JSON: the same fields in another order are the same request', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const first = expectAccepted(await h.send(t.key, { from: t.from, to: t.to(), subject: 'Order', text: 'x', metadata: { a: 1, b: 2 } }, { idempotencyKey: 'order' }));
    const second = expectAccepted(await h.send(t.key, { metadata: { b: 2, a: 1 }, text: 'x', subject: 'Order', to: t.to(), from: t.from }, { idempotencyKey: 'order' }));
    assert.is(second.id, first.id);
  });

  test('a replay answers with the original result after the email moved on and after the rules changed', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const { id: domainId } = await t.addDomain(`moving-${t.domain}`);
    const body = basicSend(t, { from: `a@moving-${t.domain}`, to: t.to('later-blocked') });
    const first = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'moves-on' }));
    // Processing advances the email (an event admission does not know), the sender domain is
    // disconnected and the recipient blocked: none of it changes the replayed admission.
    await h.stores.events.append(`email-${first.id}`, [{ id: randomUUID(), type: 'EmailProcessingStarted', data: { at: h.clock.now().toISOString() } }], { expectedRevision: 0 });
    await t.disconnect(domainId);
    await t.suppress(t.to('later-blocked'));
    const replay = await h.send(t.key, body, { idempotencyKey: 'moves-on' });
    assert.is(replay.statusCode, 202, replay.body);
    assert.equal(replay.json(), first);
    assert.equal((await t.usage()).workspace, 1);
  });

  test('a suppressed email replays as suppressed after the block is lifted', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.suppress(t.to('blocked'));
    const body = basicSend(t, { to: t.to('blocked') });
    const first = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'suppressed-once' }), 'suppressed');
    await t.unsuppress(t.to('blocked'));
    assert.equal((await h.send(t.key, body, { idempotencyKey: 'suppressed-once' })).json(), first);
    assert.equal((await t.usage()).workspace, 0);
  });

  test('the same key with a different body is 409 idempotency_conflict, and the original stays', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const first = expectAccepted(await h.send(t.key, basicSend(t), { idempotencyKey: 'conflict' }));
    expectError(await h.send(t.key, basicSend(t, { subject: 'Another subject' }), { idempotencyKey: 'conflict' }), 409, 'idempotency_conflict');
    expectError(await h.send(t.key, basicSend(t, { tags: { extra: 'x' } }), { idempotencyKey: 'conflict' }), 409, 'idempotency_conflict');
    assert.equal(await h.streamTypes(first.id), ['EmailAccepted']);
    assert.equal((await t.usage()).workspace, 1);
  });

  test('keys are scoped to the project: another project may use the same key; another key of the project replays', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sibling = await t.sibling();
    const mine = expectAccepted(await h.send(t.key, basicSend(t), { idempotencyKey: 'shared-key' }));
    const theirs = expectAccepted(await h.send(sibling.key, basicSend(sibling), { idempotencyKey: 'shared-key' }));
    assert.is.not(theirs.id, mine.id);
    const secondKey = await t.newKey(['email:send']);
    assert.equal((await h.send(secondKey, basicSend(t), { idempotencyKey: 'shared-key' })).json(), mine);
  });

  test('without a key, the same body sent twice is two emails', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const a = expectAccepted(await h.send(t.key, basicSend(t)));
    const b = expectAccepted(await h.send(t.key, basicSend(t)));
    assert.is.not(a.id, b.id);
    assert.is((await t.usage()).workspace, 2);
  });

  test('50 parallel requests with one key admit exactly one email; all answer its id; it is charged once', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const body = basicSend(t, { cc: [t.to('c1'), t.to('c2')] });
    const responses = await Promise.all(Array.from({ length: 50 }, () => h.send(t.key, body, { idempotencyKey: 'burst' })));
    for (const response of responses) assert.is(response.statusCode, 202, response.body);
    const ids = new Set(responses.map((r) => r.json().id));
    assert.is(ids.size, 1);
    const [id] = ids;
    assert.is(id, h.emailIdFor(t.project._id, 'burst'));
    assert.equal(await h.streamTypes(id), ['EmailAccepted'], 'one stream with one admission');
    assert.is((await t.usage()).workspace, 3, 'charged once');
  });

  test('50 parallel requests with one key and different bodies: one is admitted, every other is a replay of it or a conflict', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => h.send(t.key, basicSend(t, { subject: `variant ${i % 2}` }), { idempotencyKey: 'mixed' })));
    const accepted = responses.filter((r) => r.statusCode === 202);
    const winnerSubject = (await h.request('GET', `/v1/emails/${h.emailIdFor(t.project._id, 'mixed')}`, { key: t.key.secret })).json().subject;
    for (const [i, response] of responses.entries()) {
      if (`variant ${i % 2}` === winnerSubject) assert.is(response.statusCode, 202, response.body);
      else expectError(response, 409, 'idempotency_conflict');
    }
    assert.is(new Set(accepted.map((r) => r.json().id)).size, 1);
    assert.equal(await h.streamTypes(h.emailIdFor(t.project._id, 'mixed')), ['EmailAccepted']);
  });

  test('replays count toward the request rate: 1 send + 14 replays fill a development window', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    const body = basicSend(t);
    const first = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'counted' }));
    for (let i = 0; i < 14; i++) assert.equal((await h.send(t.key, body, { idempotencyKey: 'counted' })).json(), first);
    expectError(await h.send(t.key, basicSend(t, { subject: 'new' })), 429, 'rate_limit_exceeded');
    expectError(await h.send(t.key, body, { idempotencyKey: 'counted' }), 429, 'rate_limit_exceeded');
    h.clock.advance(60_000);
    assert.equal((await h.send(t.key, body, { idempotencyKey: 'counted' })).json(), first);
  });

  test('conflicts do not count toward the request rate', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    expectAccepted(await h.send(t.key, basicSend(t), { idempotencyKey: 'one' }));
    for (let i = 0; i < 20; i++) expectError(await h.send(t.key, basicSend(t, { subject: `other ${i}` }), { idempotencyKey: 'one' }), 409, 'idempotency_conflict');
    for (let i = 0; i < 14; i++) expectAccepted(await h.send(t.key, basicSend(t, { subject: `fresh ${i}` })));
    expectError(await h.send(t.key, basicSend(t)), 429, 'rate_limit_exceeded');
  });
}
