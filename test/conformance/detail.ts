// Spec: GET /v1/emails/{id} — EmailDetail with every required field; BCC and bodies never
// appear; same scope as the list (404 outside it); 400 for a malformed identifier.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { STATUSES } from '../../domain/email/status.ts';
import type { WebhookDelivery } from '../../apps/services/webhooks/deliveries.ts';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

const isDateTime = (v: unknown) => typeof v === 'string' && !Number.isNaN(Date.parse(v)) && /T.*(Z|[+-]\d\d:\d\d)$/.test(v);
const isStringArray = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string');

export function detailSuite(test: Test, ref: HarnessRef): void {
  test('every EmailDetail field, with its type; recipients omit BCC; no body or BCC anywhere', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const bcc = t.to('very-secret-bcc');
    const sent = expectAccepted(await h.send(t.key, basicSend(t, {
      from: `Acme <${t.from}>`, to: [`Ann <${t.to('ann')}>`], cc: t.to('carl'), bcc, reply_to: t.to('support'),
      subject: 'Your order', html: '<p>HTML-BODY-MARKER</p>', text: 'TEXT-BODY-MARKER',
      headers: { 'X-Ref': '7' }, tags: { kind: 'order' }, metadata: { orderId: 7 },
    })));
    await h.projected([sent.id]);
    const response = await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret });
    assert.is(response.statusCode, 200);
    const d = response.json();
    assert.equal(Object.keys(d).sort(), [
      'cc', 'createdAt', 'deliveredAt', 'events', 'failureCode', 'fromAddress', 'id', 'metadata', 'providerMessageId', 'recipients',
      'reply_to', 'sentAt', 'status', 'subject', 'tags', 'testMode', 'to', 'webhookDeliveries',
    ]);
    assert.is(d.id, sent.id);
    assert.is(d.fromAddress, t.from);
    assert.is(d.subject, 'Your order');
    assert.ok(STATUSES.includes(d.status));
    assert.is(d.status, 'queued');
    assert.is(d.testMode, false);
    assert.is(d.failureCode, null);
    assert.ok(isDateTime(d.createdAt));
    assert.is(d.sentAt, null);
    assert.is(d.deliveredAt, null);
    assert.ok(isStringArray(d.to) && isStringArray(d.cc));
    assert.equal(d.to, [`Ann <${t.to('ann')}>`]);
    assert.equal(d.cc, [t.to('carl')]);
    assert.is(d.reply_to, t.to('support'));
    assert.is(d.providerMessageId, null);
    assert.equal(d.recipients.map((r: { address: string }) => r.address).sort(), [t.to('ann'), t.to('carl')]);
    for (const r of d.recipients) {
      assert.equal(Object.keys(r).sort(), ['address', 'occurredAt', 'status']);
      assert.ok(STATUSES.includes(r.status));
      assert.ok(isDateTime(r.occurredAt));
    }
    assert.equal(d.webhookDeliveries, [], 'present, empty until deliveries exist');
    assert.equal(d.metadata, { orderId: 7 });
    assert.equal(d.tags, { kind: 'order' });
    assert.ok(d.events.length >= 1);
    for (const e of d.events) {
      assert.equal(Object.keys(e).sort(), ['id', 'occurredAt', 'payload', 'type']);
      assert.type(e.id, 'string');
      assert.type(e.type, 'string');
      assert.ok(isDateTime(e.occurredAt));
      assert.type(e.payload, 'object');
    }
    for (const secret of ['very-secret-bcc', 'HTML-BODY-MARKER', 'TEXT-BODY-MARKER']) assert.not.ok(response.body.includes(secret), `${secret} is not in the detail`);
    assert.not.ok('bcc' in d || 'html' in d || 'text' in d);
  });

  test('webhookDeliveries shows at most 100 deliveries, each with every field', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t)));
    await h.projected([sent.id]);
    // 101 deliveries as the webhooks processor keeps them (one per event and endpoint).
    const deliveries = h.stores.documents.collection<WebhookDelivery>(COLLECTIONS.webhookDeliveries);
    for (let i = 0; i < 101; i++) {
      const at = new Date(Date.parse('2026-01-01T00:00:00Z') + i * 1000).toISOString();
      await deliveries.insert({
        _id: `whd_fixture_${sent.id}_${String(i).padStart(3, '0')}`, emailId: sent.id, projectId: t.project._id, endpointId: 'whe_fixture',
        eventId: `evt_${i}`, type: 'email.sent', body: '{}', status: 'failed', attempts: 1, nextAttemptAt: null,
        attemptLogs: [{ number: 1, httpStatus: i % 2 ? 500 : null, errorCode: i % 2 ? 'http_error' : 'timeout', durationMs: 12, createdAt: at }],
        createdAt: at, updatedAt: at,
      });
    }
    const d = (await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json();
    assert.is(d.webhookDeliveries.length, 100);
    for (const w of d.webhookDeliveries) {
      assert.equal(Object.keys(w).sort(), ['attemptLogs', 'eventId', 'id', 'nextAttemptAt', 'status']);
      for (const log of w.attemptLogs) assert.equal(Object.keys(log).sort(), ['createdAt', 'durationMs', 'errorCode', 'httpStatus', 'number']);
    }
    assert.is(d.webhookDeliveries[0].eventId, 'evt_100', 'newest first');
    assert.is(d.webhookDeliveries[99].eventId, 'evt_1', 'the oldest beyond 100 is left out');
  });

  test('an email can be read back right after its 202', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t)));
    const response = await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret });
    assert.is(response.statusCode, 200, response.body);
    assert.is(response.json().id, sent.id);
  });

  test('a suppressed email reads back as suppressed, without naming a suppressed BCC recipient', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.suppress(t.to('hidden-blocked'));
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { bcc: t.to('hidden-blocked') })), 'suppressed');
    await h.projected([sent.id]);
    const response = await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret });
    assert.is(response.json().status, 'suppressed');
    assert.not.ok(response.body.includes('hidden-blocked'));
  });

  test('outside the key\'s scope is 404: another project, or another key\'s email for an email:send key', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const stranger = await h.tenant();
    const sender = await t.newKey(['email:send']);
    const reader = await t.newKey(['email:read']);
    const theirs = expectAccepted(await h.send(stranger.key, basicSend(stranger))).id;
    const mainKeys = expectAccepted(await h.send(t.key, basicSend(t))).id;
    const senders = expectAccepted(await h.send(sender, basicSend(t))).id;
    await h.projected([theirs, mainKeys, senders]);
    expectError(await h.request('GET', `/v1/emails/${theirs}`, { key: t.key.secret }), 404, 'not_found');
    expectError(await h.request('GET', `/v1/emails/${mainKeys}`, { key: sender.secret }), 404, 'not_found');
    assert.is((await h.request('GET', `/v1/emails/${senders}`, { key: sender.secret })).statusCode, 200);
    assert.is((await h.request('GET', `/v1/emails/${senders}`, { key: reader.secret })).statusCode, 200);
    assert.is((await h.request('GET', `/v1/emails/${mainKeys}`, { key: reader.secret })).statusCode, 200);
    expectError(await h.request('GET', `/v1/emails/em_${'A'.repeat(61)}`, { key: t.key.secret }), 404, 'not_found');
  });

  test('a malformed identifier is 400 validation_error: other characters, or more than 64', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const id of ['bad!id', 'a.b', 'a%20b', '%C3%A9', 'x'.repeat(65)]) {
      expectError(await h.request('GET', `/v1/emails/${id}`, { key: t.key.secret }), 400, 'validation_error');
    }
    expectError(await h.request('GET', `/v1/emails/${'x'.repeat(64)}`, { key: t.key.secret }), 404, 'not_found');
  });
}
