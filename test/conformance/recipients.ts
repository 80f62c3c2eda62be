// Spec: SendEmail to/cc/bcc — a Mailbox or an array of 1 to 50; at most 50 recipients across
// To, CC and BCC together (Limits; Errors: validation_error).
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef, type Tenant } from './harness.ts';

const many = (t: Tenant, prefix: string, n: number) => Array.from({ length: n }, (_, i) => t.to(`${prefix}${i}`));

export function recipientsSuite(test: Test, ref: HarnessRef): void {
  test('to, cc and bcc each take one mailbox as a string or an array', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('a'), cc: t.to('b'), bcc: t.to('c') })));
    const detail = (await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json();
    assert.equal(detail.to, [t.to('a')]);
    assert.equal(detail.cc, [t.to('b')]);
    expectAccepted(await h.send(t.key, basicSend(t, { to: [t.to('a')], cc: [t.to('b')], bcc: [t.to('c')] })));
  });

  for (const field of ['to', 'cc', 'bcc']) {
    test(`${field}: an array of 50 is accepted; 51 and an empty array are validation_errors`, async () => {
      const h = await ref.get();
      const t = await h.tenant();
      const body = (n: number) => (field === 'to' ? basicSend(t, { to: many(t, 'r', n) }) : basicSend(t, { to: [], [field]: many(t, 'r', n) }));
      // "to" is required: the other fields get their 50 with To holding none... which is refused,
      // so they are tested with one To and 49 of their own at the total's edge below.
      if (field === 'to') {
        expectAccepted(await h.send(t.key, body(50)));
      } else {
        expectAccepted(await h.send(t.key, basicSend(t, { to: t.to(), [field]: many(t, 'r', 49) })));
      }
      expectError(await h.send(t.key, field === 'to' ? body(51) : basicSend(t, { to: t.to(), [field]: many(t, 'r', 51) })), 400, 'validation_error', `body.${field}`);
      expectError(await h.send(t.key, field === 'to' ? body(0) : basicSend(t, { to: t.to(), [field]: [] })), 400, 'validation_error', `body.${field}`);
    });
  }

  test('50 recipients across to, cc and bcc are accepted; 51 are a validation_error', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { to: many(t, 't', 20), cc: many(t, 'c', 20), bcc: many(t, 'b', 10) })));
    expectError(await h.send(t.key, basicSend(t, { to: many(t, 't', 20), cc: many(t, 'c', 20), bcc: many(t, 'b', 11) })), 400, 'validation_error', '50');
    expectError(await h.send(t.key, basicSend(t, { to: t.to(), cc: many(t, 'c', 50) })), 400, 'validation_error', '50');
    expectError(await h.send(t.key, basicSend(t, { to: t.to(), bcc: many(t, 'b', 50) })), 400, 'validation_error', '50');
  });

  test('a recipient that is not a mailbox string is a validation_error naming its field', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectError(await h.send(t.key, basicSend(t, { to: [t.to(), 5] })), 400, 'validation_error', 'body.to');
    expectError(await h.send(t.key, basicSend(t, { cc: { address: t.to() } })), 400, 'validation_error', 'body.cc');
    expectError(await h.send(t.key, basicSend(t, { bcc: [null] })), 400, 'validation_error', 'body.bcc');
  });
}
