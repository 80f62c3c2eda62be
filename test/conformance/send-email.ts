// Spec: SendEmail — required fields, subject 1 to 998 without CR/LF, html/text up to
// 10,000,000 characters with at least one nonempty, reply_to, metadata, no other properties;
// SendResult — {id, status, test_mode}.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

export function sendEmailSuite(test: Test, ref: HarnessRef): void {
  test('SendResult is exactly {id, status: queued, test_mode}: false for production keys, true for development keys', async () => {
    const h = await ref.get();
    const live = await h.tenant();
    const sent = await h.send(live.key, basicSend(live));
    assert.is(sent.statusCode, 202);
    assert.equal(Object.keys(sent.json()).sort(), ['id', 'status', 'test_mode']);
    assert.equal({ status: sent.json().status, test_mode: sent.json().test_mode }, { status: 'queued', test_mode: false });
    assert.match(sent.json().id, /^[A-Za-z0-9_-]{1,64}$/);
    const dev = await h.tenant({ environment: 'development' });
    const devSent = expectAccepted(await h.send(dev.key, basicSend(dev)));
    assert.is(devSent.test_mode, true);
    assert.is.not(devSent.id, sent.json().id);
  });

  for (const field of ['from', 'to', 'subject']) {
    test(`${field} is required`, async () => {
      const h = await ref.get();
      const t = await h.tenant();
      const body = basicSend(t);
      delete body[field];
      expectError(await h.send(t.key, body), 400, 'validation_error', `body.${field}`);
    });
  }

  test('subject: 998 characters accepted; 999, empty, CR or LF, or not a string are validation_errors', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { subject: 's'.repeat(998) })));
    for (const subject of ['s'.repeat(999), '', 'Hello\r\nBcc: x@evil.test', 'line\nbreak', 'carriage\rreturn', 7, null]) {
      expectError(await h.send(t.key, basicSend(t, { subject })), 400, 'validation_error', 'body.subject');
    }
  });

  test('subject counts characters, not UTF-16 units: 998 emoji accepted, 999 refused', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { subject: '📦'.repeat(998) })));
    assert.is((await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json().subject, '📦'.repeat(998));
    expectAccepted(await h.send(t.key, basicSend(t, { subject: `${'é'.repeat(997)}📦` })));
    expectError(await h.send(t.key, basicSend(t, { subject: '📦'.repeat(999) })), 400, 'validation_error', 'body.subject');
  });

  test('at least one of html or text must be present and nonempty', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { text: 'only text' })));
    const htmlOnly = basicSend(t, { html: '<p>only html</p>' });
    delete htmlOnly.text;
    expectAccepted(await h.send(t.key, htmlOnly));
    expectAccepted(await h.send(t.key, basicSend(t, { html: '', text: 'text with empty html' })));
    const neither = basicSend(t);
    delete neither.text;
    expectError(await h.send(t.key, neither), 400, 'validation_error', 'html');
    expectError(await h.send(t.key, basicSend(t, { text: '' })), 400, 'validation_error', 'html');
    expectError(await h.send(t.key, basicSend(t, { text: '', html: '' })), 400, 'validation_error', 'html');
    expectError(await h.send(t.key, basicSend(t, { text: 5 })), 400, 'validation_error', 'body.text');
    expectError(await h.send(t.key, basicSend(t, { html: ['<p>'] })), 400, 'validation_error', 'body.html');
  });

  test('text of exactly 10,000,000 characters is accepted (html: see Request size)', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { text: 't'.repeat(10_000_000) })));
    await h.projected([sent.id]);
  });

  test('html and text: 10,000,001 characters is a validation_error (the body is still under 10 MiB)', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const over = 'x'.repeat(10_000_001);
    expectError(await h.send(t.key, basicSend(t, { html: over })), 400, 'validation_error', 'body.html');
    expectError(await h.send(t.key, basicSend(t, { text: over })), 400, 'validation_error', 'body.text');
  });

  test('reply_to is optional and read back; metadata is free-form and retained', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const metadata = { orderId: 42, nested: { ok: true, list: [1, 'two'] }, empty: null };
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { reply_to: `Support <support@${t.domain}>`, metadata })));
    const detail = (await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json();
    assert.is(detail.reply_to, `Support <support@${t.domain}>`);
    assert.equal(detail.metadata, metadata);
    const plain = expectAccepted(await h.send(t.key, basicSend(t)));
    const plainDetail = (await h.request('GET', `/v1/emails/${plain.id}`, { key: t.key.secret })).json();
    assert.is(plainDetail.reply_to, null);
    assert.equal(plainDetail.metadata, {});
  });

  test('metadata must be an object', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const metadata of [[1, 2], 'text', 3, null, true]) {
      expectError(await h.send(t.key, basicSend(t, { metadata })), 400, 'validation_error', 'body.metadata');
    }
  });

  test('no properties other than those listed: attachments, scheduled and batch sends are refused', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const [field, value] of [['attachments', [{ filename: 'a.txt', content: 'aGk=' }]], ['send_at', '2030-01-01T00:00:00Z'], ['scheduled_at', '2030-01-01T00:00:00Z'], ['emails', []], ['From', 'x@y.test'], ['replyTo', 'x@y.test']] as const) {
      expectError(await h.send(t.key, basicSend(t, { [field]: value })), 400, 'validation_error', `body.${field}`);
    }
  });

  test('the body must be a JSON object', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const payload of ['[]', '"text"', '42', 'null']) {
      expectError(await h.request('POST', '/v1/emails', { key: t.key.secret, payload }), 400, 'validation_error');
    }
    expectError(await h.request('POST', '/v1/emails', { key: t.key.secret, payload: '{"from": ' }), 400, 'validation_error');
  });
}
