// Spec: POST /v1/emails rules 1–2 — the From domain must be the exact verified domain of the
// project (else 422 domain_not_verified, or a disallowed-sender 422); with a development key
// every To, CC and BCC address must be on a verified domain connected to the project, else
// the whole request is 422 test_recipient_not_allowed. Rejections store nothing.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type Harness, type HarnessRef, type Tenant } from './harness.ts';

/** Sends with an Idempotency-Key, so that the test can look at the stream the email would have had. */
async function sendTracked(h: Harness, t: Tenant, body: Record<string, unknown>) {
  const idempotencyKey = `tracked-${Math.random()}`;
  return { response: await h.send(t.key, body, { idempotencyKey }), emailId: h.emailIdFor(t.project._id, idempotencyKey) };
}

async function expectNothingStored(h: Harness, t: Tenant, emailId: string, usageBefore: number) {
  assert.equal(await h.streamTypes(emailId), [], 'no event was appended');
  assert.is((await t.usage()).workspace, usageBefore, 'nothing was charged');
}

export function senderSuite(test: Test, ref: HarnessRef): void {
  test('a sender on the verified domain connected to the project is accepted, with or without a display name', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { from: `noreply@${t.domain}` })));
    expectAccepted(await h.send(t.key, basicSend(t, { from: `Acme <noreply@${t.domain.toUpperCase()}>` })));
  });

  test('a sender domain that is unknown, unverified or a subdomain of a verified one is 422 domain_not_verified; nothing is stored', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const pending = `pending-${t.domain}`;
    await t.addDomain(pending, { verified: false });
    for (const from of [`a@unknown-${t.domain}`, `a@${pending}`, `a@sub.${t.domain}`, `a@${t.domain.split('.').slice(1).join('.')}`]) {
      const { response, emailId } = await sendTracked(h, t, basicSend(t, { from }));
      expectError(response, 422, 'domain_not_verified');
      await expectNothingStored(h, t, emailId, 0);
    }
  });

  test("a domain verified in the workspace but connected to another project is refused with 422", async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const other = await t.sibling();
    const { response, emailId } = await sendTracked(h, t, basicSend(t, { from: other.from }));
    expectError(response, 422, ['domain_not_verified', 'sender_not_allowed']);
    await expectNothingStored(h, t, emailId, 0);
    expectAccepted(await h.send(other.key, basicSend(other)));
  });

  test('a sender domain disconnected from the project is refused from then on', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const { id } = await t.addDomain(`second-${t.domain}`);
    expectAccepted(await h.send(t.key, basicSend(t, { from: `a@second-${t.domain}` })));
    await t.disconnect(id);
    expectError(await h.send(t.key, basicSend(t, { from: `a@second-${t.domain}` })), 422, ['domain_not_verified', 'sender_not_allowed']);
  });

  test('development key: To, CC and BCC on verified connected domains are accepted', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await t.addDomain(`other-${t.domain}`);
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: [t.to('a'), `b@other-${t.domain}`], cc: t.to('c'), bcc: [`d@OTHER-${t.domain}`] })));
    assert.is(sent.test_mode, true);
  });

  for (const field of ['to', 'cc', 'bcc']) {
    test(`development key: one ${field} address outside the allowed domains rejects the whole request with 422 test_recipient_not_allowed`, async () => {
      const h = await ref.get();
      const t = await h.tenant({ environment: 'development' });
      const pending = `pending-${t.domain}`;
      await t.addDomain(pending, { verified: false });
      const sibling = await t.sibling();
      for (const outside of ['someone@gmail.com', `x@sub.${t.domain}`, `x@${pending}`, sibling.to()]) {
        const body = basicSend(t, field === 'to' ? { to: [t.to(), outside] } : { [field]: [t.to('ok'), outside] });
        const { response, emailId } = await sendTracked(h, t, body);
        expectError(response, 422, 'test_recipient_not_allowed');
        await expectNothingStored(h, t, emailId, 0);
      }
    });
  }

  test('production keys send to any recipient domain', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: 'someone@gmail.com', cc: 'x@elsewhere.test', bcc: 'y@another.test' })));
    assert.is(sent.test_mode, false);
  });
}
