// Spec: Limits — 5,000 accepted To/CC/BCC recipients per workspace and UTC month, shared by
// its projects; 1,000 per development key and month, also counted toward the workspace;
// 429 quota_exceeded; resets at UTC month start. Never exceeded under concurrent requests.
// Usage near an edge is charged straight to the usage stream, as admissions charge it.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef, type Tenant } from './harness.ts';

const recipients = (t: Tenant, n: number) => {
  const all = Array.from({ length: n }, (_, i) => t.to(`r${i}`));
  // Spread over To, CC and BCC: all three count.
  return { to: all.filter((_, i) => i % 3 === 0), cc: all.filter((_, i) => i % 3 === 1), bcc: all.filter((_, i) => i % 3 === 2) };
};
const spread = (t: Tenant, n: number) => {
  const r = recipients(t, n);
  return basicSend(t, { to: r.to, ...(r.cc.length ? { cc: r.cc } : {}), ...(r.bcc.length ? { bcc: r.bcc } : {}) });
};

export function quotasSuite(test: Test, ref: HarnessRef): void {
  test('workspace: recipients up to exactly 5,000 are accepted; one more is 429 quota_exceeded', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.charge(4_990);
    expectError(await h.send(t.key, spread(t, 11)), 429, 'quota_exceeded', 'workspace');
    expectAccepted(await h.send(t.key, spread(t, 10)));
    assert.is((await t.usage()).workspace, 5_000);
    const message = expectError(await h.send(t.key, basicSend(t)), 429, 'quota_exceeded');
    assert.match(message, /5000/);
    assert.is((await t.usage()).workspace, 5_000);
  });

  test('workspace: the allowance is shared by all its projects', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sibling = await t.sibling();
    await t.charge(4_999);
    expectAccepted(await h.send(sibling.key, basicSend(sibling)));
    expectError(await h.send(sibling.key, basicSend(sibling)), 429, 'quota_exceeded');
    expectError(await h.send(t.key, basicSend(t)), 429, 'quota_exceeded');
    const stranger = await h.tenant();
    expectAccepted(await h.send(stranger.key, basicSend(stranger)));
  });

  test('development key: 1,000 recipients a month per key; one more is 429 quota_exceeded naming the key', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await t.charge(995);
    expectError(await h.send(t.key, spread(t, 6)), 429, 'quota_exceeded', 'development key');
    expectAccepted(await h.send(t.key, spread(t, 5)));
    expectError(await h.send(t.key, basicSend(t)), 429, 'quota_exceeded', 'development key');
    // Another development key of the same workspace has its own 1,000 ...
    const other = await t.newKey();
    expectAccepted(await h.send(other, spread(t, 7)));
    // ... and both count toward the workspace.
    const usage = await t.usage();
    assert.is(usage.workspace, 1_007);
    assert.is(usage.byKey[t.key.id], 1_000);
    assert.is(usage.byKey[other.id], 7);
  });

  test('development keys count toward the workspace allowance, and the workspace caps them', async () => {
    const h = await ref.get();
    const live = await h.tenant();
    await live.charge(4_998);
    const devProject = await live.sibling('development');
    assert.match(devProject.key.secret, /^rr_test_/);
    expectAccepted(await h.send(devProject.key, spread(devProject, 2)));
    expectError(await h.send(devProject.key, basicSend(devProject)), 429, 'quota_exceeded', 'workspace');
  });

  test('quotas reset at the start of the UTC month', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const now = h.clock.now();
    const lastMs = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - 1);
    h.clock.set(lastMs);
    await t.charge(5_000);
    expectError(await h.send(t.key, basicSend(t)), 429, 'quota_exceeded', new Date(lastMs.getTime() + 1).toISOString());
    h.clock.advance(1);
    expectAccepted(await h.send(t.key, basicSend(t)));
    assert.is((await t.usage()).workspace, 1);
  });

  test('a request refused by the quota under an Idempotency-Key is admitted when retried with it after the reset, charged once', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const now = h.clock.now();
    h.clock.set(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - 1));
    await t.charge(5_000);
    const body = basicSend(t, { cc: t.to('cc') });
    expectError(await h.send(t.key, body, { idempotencyKey: 'next-month' }), 429, 'quota_exceeded');
    assert.equal(await h.streamTypes(h.emailIdFor(t.project._id, 'next-month')), []);
    h.clock.advance(1);
    const sent = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'next-month' }));
    assert.equal((await h.send(t.key, body, { idempotencyKey: 'next-month' })).json(), sent);
    assert.is((await t.usage()).workspace, 2);
  });

  test('requests refused by a quota do not count toward the request rate', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await t.charge(1_000);
    for (let i = 0; i < 20; i++) expectError(await h.send(t.key, basicSend(t)), 429, 'quota_exceeded');
  });

  test('suppressed sends are not refused by an exhausted quota and add nothing', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.charge(5_000);
    await t.suppress(t.to('blocked'));
    expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('blocked') })), 'suppressed');
    assert.is((await t.usage()).workspace, 5_000);
  });

  test('at the edge, parallel sends never exceed the workspace allowance: 4,990 used, 20 at once admit exactly 10', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.charge(4_990);
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => h.send(t.key, basicSend(t, { to: t.to(`p${i}`) }))));
    assert.is(responses.filter((r) => r.statusCode === 202).length, 10);
    for (const r of responses.filter((r) => r.statusCode !== 202)) expectError(r, 429, 'quota_exceeded');
    assert.is((await t.usage()).workspace, 5_000);
  });

  test('at the edge, parallel sends never exceed a development key: 995 used, 12 at once admit exactly 5', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await t.charge(995);
    const responses = await Promise.all(Array.from({ length: 12 }, (_, i) => h.send(t.key, basicSend(t, { to: t.to(`p${i}`) }))));
    assert.is(responses.filter((r) => r.statusCode === 202).length, 5);
    for (const r of responses.filter((r) => r.statusCode !== 202)) expectError(r, 429, 'quota_exceeded');
    assert.is((await t.usage()).byKey[t.key.id], 1_000);
  });

  test('at the edge with mixed sizes: parallel sends fill the allowance without passing it', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.charge(4_900);
    const sizes = Array.from({ length: 30 }, (_, i) => 1 + (i % 7));
    const responses = await Promise.all(sizes.map((n) => h.send(t.key, spread(t, n))));
    const accepted = sizes.filter((_, i) => responses[i].statusCode === 202).reduce((a, b) => a + b, 0);
    const usage = (await t.usage()).workspace;
    assert.is(usage, 4_900 + accepted);
    assert.ok(usage <= 5_000);
    // Everything refused was refused because it did not fit (usage only grows, so it still does not).
    for (const [i, r] of responses.entries()) {
      if (r.statusCode === 202) continue;
      expectError(r, 429, 'quota_exceeded');
      assert.ok(usage + sizes[i] > 5_000, `a send of ${sizes[i]} was refused at ${usage} used`);
    }
  });
}
