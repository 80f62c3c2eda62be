// Spec: SendEmail.tags — at most 20; names 1 to 128 characters of [A-Za-z0-9_-], not
// beginning with rr_; values strings of at most 256 characters of [A-Za-z0-9_-] (may be empty).
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

const tagsOf = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`tag_${i}`, `v-${i}`]));

export function tagsSuite(test: Test, ref: HarnessRef): void {
  test('20 tags are accepted and read back; 21 are a validation_error', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { tags: tagsOf(20) })));
    assert.equal((await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json().tags, tagsOf(20));
    expectError(await h.send(t.key, basicSend(t, { tags: tagsOf(21) })), 400, 'validation_error', 'body.tags');
  });

  test('names: 128 characters accepted; 129, empty, other characters or the rr_ prefix are validation_errors', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { tags: { ['N'.repeat(128)]: 'v', 'a-b_C9': 'v', rr: 'v', xrr_: 'v' } })));
    for (const name of ['N'.repeat(129), '', 'a.b', 'a b', 'ä', 'rr_', 'rr_internal']) {
      expectError(await h.send(t.key, basicSend(t, { tags: { [name]: 'v' } })), 400, 'validation_error', 'body.tags');
    }
  });

  test('values: 256 characters and the empty string accepted; 257, other characters or non-strings are validation_errors', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { tags: { long: 'v'.repeat(256), empty: '', mixed: 'A-b_9' } })));
    for (const value of ['v'.repeat(257), 'a b', 'a.b', 'ü', 'a\nb', 1, true, null]) {
      expectError(await h.send(t.key, basicSend(t, { tags: { kind: value } })), 400, 'validation_error', 'body.tags.kind');
    }
    expectError(await h.send(t.key, basicSend(t, { tags: ['a'] })), 400, 'validation_error', 'body.tags');
  });
}
