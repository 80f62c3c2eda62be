// Upgrade from 2a8b10c: blocks of addresses whose quoted local part holds "<" stay listable,
// pageable and removable. Up to 2a8b10c admission and the suppression list took such an address
// (`"a<b"@example.org`); since then admission refuses it (domain/mailbox.ts parseAddress), as
// the SMTP library could not send it. A data directory from 2a8b10c holds such entries, made by
// an admin or by the suppressor after the hard bounce the library's refusal became
// (test/fixtures/upgrade-2a8b10c: `"a<b"@example.org` blocked by hand, `"c<d"@example.org` by the
// bounce). The list shows them as before; a page may end on one (its cursor is that address), and
// `DELETE /v1/workspaces/:id/suppressions/:address` with the address the list shows removes it
// (docs/operations.md: a block made before an upgrade can be removed), though today's rules would
// not let such an address be added.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { endUpgraded, fixtureJson, upgradeFixture, type UpgradedFixture } from './support/upgrade-fixtures.ts';

const FIXTURE = 'upgrade-2a8b10c';

type Ctx = UpgradedFixture;

const test = suite<Ctx>('upgrade from 2a8b10c: a block of an address with "<" in its quoted local part');

test.before((ctx) => upgradeFixture(ctx, FIXTURE));

test.after(endUpgraded);

const listed = async ({ up, cookie, recorded }: Ctx) => {
  const response = await fetch(`${up.baseUrl}/v1/workspaces/${recorded.workspaceId}/suppressions`, { headers: { cookie } });
  assert.is(response.status, 200);
  return ((await response.json()) as { suppressions: Array<{ address: string; reason: string }> }).suppressions;
};

test('the old blocks are listed as the old version listed them', async (ctx) => {
  const { suppressions } = fixtureJson<{ suppressions: Array<{ address: string; reason: string }> }>(FIXTURE, 'requests.json');
  assert.equal((await listed(ctx)).map((e) => [e.address, e.reason]), suppressions.map((e) => [e.address, e.reason]));
});

test('the list pages one entry at a time through them, each cursor the address a page ended on', async (ctx) => {
  const { up, cookie, recorded } = ctx;
  const all = (await listed(ctx)).map((e) => e.address);
  const walked: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `?limit=1${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const response = await fetch(`${up.baseUrl}/v1/workspaces/${recorded.workspaceId}/suppressions${query}`, { headers: { cookie } });
    assert.is(response.status, 200, `the page after ${cursor}: ${await response.clone().text()}`);
    const page = (await response.json()) as { suppressions: Array<{ address: string }>; next_cursor: string | null };
    walked.push(...page.suppressions.map((e) => e.address));
    cursor = page.next_cursor;
  } while (cursor !== null && walked.length <= all.length);
  assert.equal(walked, all);
});

test('each entry the list shows can be removed by the address it shows', async (ctx) => {
  const { up, cookie, recorded } = ctx;
  for (const { address } of await listed(ctx)) {
    const response = await fetch(`${up.baseUrl}/v1/workspaces/${recorded.workspaceId}/suppressions/${encodeURIComponent(address)}`, {
      method: 'DELETE',
      // The default RELAY_DASHBOARD_ORIGIN: http://localhost:$PORT.
      headers: { cookie, origin: `http://localhost:${new URL(up.baseUrl).port}` },
    });
    const body = await response.text();
    assert.is(response.status, 200, `DELETE of ${address}, which the list shows: ${response.status} ${body}`);
    assert.equal(JSON.parse(body), { deleted: true, address });
  }
  assert.equal(await listed(ctx), [], 'the list is empty once every entry it showed was removed');
});

test.run();
