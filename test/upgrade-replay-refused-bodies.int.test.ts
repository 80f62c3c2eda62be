// Upgrade from c0b790a (2026-11-27): idempotent replays of requests the old version admitted
// and today's validation refuses.
//
// Validation has grown stricter since (e1c82d5, ceab941, 9cd9b73, 034490e, all 2026-11-28): a
// URI-list header (List-Unsubscribe) must be ASCII, a header sent as written (In-Reply-To) may not
// hold a run of 76 spaces, an address-bearing header (Errors-To) must hold addresses, List-Id must
// hold a <list-id>, and a malformed xn-- label is refused. The fixture
// (test/fixtures/upgrade-c0b790a) holds one email admitted (202, delivered) for each of those
// bodies, each under its Idempotency-Key. A retry of the very same request (a client that lost
// the answer while Relay was stopped for the upgrade retries it once it is back) was answered
// `400 validation_error`: the body was refused (apps/api/plugins/emails.ts) before admission
// reached the replay. Now a refused body with a key is looked up as a replay first
// (apps/services/admission.ts, replayOfRefused).
//
// What users expect: the spec's replay rule (same Idempotency-Key, identical body: "Returns
// original id and admission result even if processing has advanced"), and
// apps/api/INTERFACE-DECISIONS.md ("An Idempotency-Key never expires: it lives as long as the
// email it admitted. Replays answer with the original id, status, test_mode and reason"):
// the original 202 answer, and no charge.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { endUpgraded, postSend, upgradeFixture, type UpgradedFixture } from './support/upgrade-fixtures.ts';

const FIXTURE = 'upgrade-c0b790a';

type Ctx = UpgradedFixture;

const test = suite<Ctx>('upgrade from c0b790a: replays of requests the old version admitted');

test.before((ctx) => upgradeFixture(ctx, FIXTURE));

test.after(endUpgraded);

const usedThisMonth = async ({ up, cookie, recorded }: Ctx): Promise<number> => {
  const response = await fetch(`${up.baseUrl}/v1/workspaces/${recorded.workspaceId}/usage`, { headers: { cookie } });
  assert.is(response.status, 200);
  return ((await response.json()) as { recipients: { used: number } }).recipients.used;
};

test('a replay of a request today\'s rules still accept gets its original answer (control)', async ({ up, recorded }) => {
  const { body, answer } = recorded.requests['quoted-1'];
  const replay = await postSend(up.baseUrl, recorded.apiKey, body, 'quoted-1');
  assert.is(replay.status, 202);
  assert.equal(replay.body, answer);
});

for (const key of ['rules-list-unsubscribe', 'rules-in-reply-to', 'rules-errors-to', 'rules-list-id', 'rules-punycode']) {
  test(`a replay of ${key}, admitted by the old version, gets its original answer and no charge`, async (ctx) => {
    const { body, answer } = ctx.recorded.requests[key];
    assert.is(answer.status, 'queued', 'the old version admitted it');
    const before = await usedThisMonth(ctx);
    const replay = await postSend(ctx.up.baseUrl, ctx.recorded.apiKey, body, key);
    assert.is(replay.status, 202, `the same request under the same Idempotency-Key: ${replay.status} ${JSON.stringify(replay.body)}; the email it names is ${answer.id}`);
    assert.equal(replay.body, answer);
    assert.is(await usedThisMonth(ctx), before, 'a replay adds no usage');
  });
}

test.run();
