// Spec: POST /v1/emails rule 3 and States — any actively suppressed To, CC or BCC recipient
// makes the whole email suppressed: 202 with status suppressed and a reason, stored without a
// queue job and without a quota charge. BCC never appears in responses.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

export function suppressionSuite(test: Test, ref: HarnessRef): void {
  for (const field of ['to', 'cc', 'bcc']) {
    test(`a suppressed ${field} recipient suppresses the email: 202 suppressed with a reason, no queue job, no charge`, async () => {
      const h = await ref.get();
      const t = await h.tenant();
      const blocked = t.to('blocked');
      await t.suppress(blocked);
      const body = basicSend(t, field === 'to' ? { to: [t.to(), blocked] } : { [field]: blocked });
      const response = await h.send(t.key, body);
      const sent = expectAccepted(response, 'suppressed');
      assert.equal(Object.keys(sent).sort(), ['id', 'reason', 'status', 'test_mode']);
      assert.type(sent.reason, 'string');
      assert.ok(sent.reason!.length > 0);
      assert.is(sent.test_mode, false);
      assert.equal(await h.streamTypes(sent.id), ['EmailSuppressed'], 'stored, without the EmailAccepted that queues delivery');
      assert.equal((await t.usage()).workspace, 0, 'no monthly usage');
      const detail = await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret });
      assert.is(detail.json().status, 'suppressed');
      if (field === 'bcc') {
        assert.not.ok(response.body.includes(blocked), 'the BCC address is not in the response');
        assert.not.ok(detail.body.includes(blocked), 'nor in the detail');
      } else {
        assert.ok(sent.reason!.includes(blocked), 'the reason names the visible recipient');
      }
    });
  }

  test('suppressions match addresses whatever their case, across the whole workspace', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sibling = await t.sibling();
    await t.suppress(sibling.to('Blocked'));
    expectAccepted(await h.send(sibling.key, basicSend(sibling, { to: `Blocked Person <BLOCKED@${sibling.domain.toUpperCase()}>` })), 'suppressed');
  });

  test('a block in another workspace does not apply; a lifted block no longer suppresses', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const stranger = await h.tenant();
    await stranger.suppress(t.to('shared'));
    expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('shared') })));
    await t.suppress(t.to('shared'));
    expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('shared') })), 'suppressed');
    await t.unsuppress(t.to('shared'));
    expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('shared') })));
  });

  test('development keys: the test-recipient rule comes first, then suppression; suppressed results carry test_mode', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await t.suppress('someone@gmail.com');
    expectError(await h.send(t.key, basicSend(t, { to: 'someone@gmail.com' })), 422, 'test_recipient_not_allowed');
    await t.suppress(t.to('blocked'));
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('blocked') })), 'suppressed');
    assert.is(sent.test_mode, true);
  });
}
