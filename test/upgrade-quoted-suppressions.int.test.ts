// Upgrade from c0b790a (2026-11-27) with a block written by the older address rule.
//
// Versions before 6ae826a (2026-11-28) kept an address as written, only lower-cased: a recipient
// sent to as `"Ann"@example.org` (needless quotes) that bounced hard was put on the suppression
// list as `"ann"@example.org`, under the id `<workspace>:"ann"@example.org`, and its email's events
// and read model hold that form. Today every address is taken in one canonical form
// (domain/mailbox.ts canonicalAddress: the quotes dropped, `ann@example.org`), the only one
// admission looks up, a removal names and the `recipient` filter seeks. Left as it was, the block
// the list showed stopped blocking, could not be removed (404), and the old email dropped out of
// `?recipient=`. So the events are read in the canonical form (domain/email/upcast.ts) and the
// first start re-keys the entry and rewrites the old email's read model
// (apps/services/management/canonical-addresses.ts), once.
//
// What users expect, on the fixture (test/fixtures/upgrade-c0b790a): a block made before the
// upgrade keeps blocking its mailbox however a send writes it (apps/api/INTERFACE-DECISIONS.md:
// "A suppression blocks its mailbox however a send writes it"), with its reason, email and time;
// the entry the list shows can be removed; the old email is found by its recipient, and reads as
// a rebuild of the read model reads it; the old suppressed send's replay answers as it did.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';
import { endUpgraded, postSend, upgradeFixture, type UpgradedFixture } from './support/upgrade-fixtures.ts';

const FIXTURE = 'upgrade-c0b790a';

type Ctx = UpgradedFixture;

const test = suite<Ctx>('upgrade from c0b790a: a block of a needlessly quoted address');

test.before((ctx) => upgradeFixture(ctx, FIXTURE));

test.after(endUpgraded);

const listed = async ({ up, cookie, recorded }: Ctx) => {
  const response = await fetch(`${up.baseUrl}/v1/workspaces/${recorded.workspaceId}/suppressions`, { headers: { cookie } });
  assert.is(response.status, 200);
  return ((await response.json()) as { suppressions: Array<{ address: string; reason: string; emailId: string | null; createdAt: string }> }).suppressions;
};

test('the old block is on the list under the canonical form of its address, as it was otherwise', async (ctx) => {
  const entries = await listed(ctx);
  // The one-off pass at the first start re-keyed it (apps/services/management/canonical-addresses.ts):
  // its reason, email and time are the old version's.
  assert.equal(entries.map((e) => [e.address, e.reason, e.emailId, e.createdAt]), [['ann@example.org', 'hard_bounce', ctx.recorded.requests['quoted-1'].answer.id, '2026-11-29T06:29:08.551Z']]);
  // The old version blocked a send written as the bounced one was.
  assert.is(ctx.recorded.requests['quoted-2'].answer.status, 'suppressed');
});

test('a replay of the old suppressed send gets its original answer, its reason as the old version wrote it', async ({ up, recorded }) => {
  const { body, answer } = recorded.requests['quoted-2'];
  const replay = await postSend(up.baseUrl, recorded.apiKey, body, 'quoted-2');
  assert.is(replay.status, 202);
  assert.equal(replay.body, answer);
});

test('a send to the address written as before the upgrade is still suppressed', async ({ up, recorded }) => {
  const sent = await postSend(up.baseUrl, recorded.apiKey, { from: 'hello@example.com', to: '"Ann"@example.org', subject: 'After the upgrade', text: 'hello again' });
  assert.is(sent.status, 202);
  assert.is(sent.body.status, 'suppressed', `the recipient bounced hard before the upgrade and is on the list, yet the send was ${JSON.stringify(sent.body)}`);
});

test('a send to the same mailbox written without the quotes is suppressed', async ({ up, recorded }) => {
  const sent = await postSend(up.baseUrl, recorded.apiKey, { from: 'hello@example.com', to: 'ann@example.org', subject: 'After the upgrade', text: 'hello again' });
  assert.is(sent.status, 202);
  assert.is(sent.body.status, 'suppressed', `"ann"@example.org and ann@example.org are one mailbox today, yet the send was ${JSON.stringify(sent.body)}`);
});

test('the old email is found by its recipient', async ({ up, recorded }) => {
  const id = recorded.requests['quoted-1'].answer.id;
  for (const recipient of ['ann@example.org', '"Ann"@example.org']) {
    const response = await fetch(`${up.baseUrl}/v1/emails?recipient=${encodeURIComponent(recipient)}`, { headers: { authorization: `Bearer ${recorded.apiKey}` } });
    assert.is(response.status, 200);
    const ids = ((await response.json()) as { emails: Array<{ id: string }> }).emails.map((e) => e.id);
    assert.ok(ids.includes(id), `recipient=${recipient} lists ${JSON.stringify(ids)}, not the email sent to "Ann"@example.org before the upgrade (${id})`);
  }
});

test('the old emails read with the canonical address, as a rebuild of the read model reads them', async (ctx) => {
  const { up, recorded } = ctx;
  const read = async (id: string) => {
    const response = await fetch(`${up.baseUrl}/v1/emails/${id}`, { headers: { authorization: `Bearer ${recorded.apiKey}` } });
    assert.is(response.status, 200);
    const email: any = await response.json();
    return { ...email, webhookDeliveries: null };
  };
  const ids = [recorded.requests['quoted-1'].answer.id, recorded.requests['quoted-2'].answer.id];
  const kept = await Promise.all(ids.map(read));
  const [bounced, suppressed] = kept;
  assert.equal(bounced.to, ['"Ann"@example.org'], 'the mailbox as written stays');
  assert.equal(bounced.recipients.map((r: { address: string; status: string }) => [r.address, r.status]), [['ann@example.org', 'hard_bounced']]);
  const shown = bounced.events.flatMap((e: { payload: { recipients?: unknown } }) => (Array.isArray(e.payload.recipients) ? e.payload.recipients : []));
  assert.ok(shown.length > 0 && shown.every((r: { address: string }) => r.address === 'ann@example.org'), JSON.stringify(bounced.events));
  const suppression = suppressed.events.find((e: { type: string }) => e.type === 'email.suppressed');
  assert.equal(suppression.payload, { reason: recorded.requests['quoted-2'].answer.reason, suppressedRecipients: [{ address: 'ann@example.org', reason: 'hard_bounce' }] });
  const run = await runRelay(['projections', 'rebuild', 'emails'], { RELAY_DATA_DIR: ctx.fixture.dataDir });
  assert.is(run.code, 0, run.stderr);
  assert.equal(await Promise.all(ids.map(read)), kept);
});

test('the entry the list shows can be removed', async (ctx) => {
  const [entry] = await listed(ctx);
  const response = await fetch(`${ctx.up.baseUrl}/v1/workspaces/${ctx.recorded.workspaceId}/suppressions/${encodeURIComponent(entry.address)}`, { method: 'DELETE', headers: { cookie: ctx.cookie } });
  assert.is(response.status, 200, `DELETE of ${entry.address}, as the list shows it: ${response.status} ${await response.text()}`);
  assert.equal(await listed(ctx), []);
});

test('after a restart the removed block stays removed, and the mailbox is sent to', async (ctx) => {
  const stopped = await ctx.up.relay.stop();
  assert.is(stopped.code, 0, ctx.up.relay.output());
  const again = spawnRelay(['start'], ctx.up.env);
  ctx.up = { ...ctx.up, relay: again };
  await waitForReady(ctx.up.baseUrl, again, 60_000);
  assert.equal(await listed(ctx), []);
  const sent = await postSend(ctx.up.baseUrl, ctx.recorded.apiKey, { from: 'hello@example.com', to: '"Ann"@example.org', subject: 'Unblocked', text: 'hello' });
  assert.is(sent.body.status, 'queued', JSON.stringify(sent.body));
});

test.run();
