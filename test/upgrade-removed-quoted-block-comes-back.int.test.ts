// The one-off canonical addresses pass (apps/services/management/canonical-addresses.ts) re-keys
// what versions before 2026-11-28 kept under an older form of an address (`"ann"@example.org`),
// the suppressor's records of the bounces and complaints it is done with included
// (suppression_sources, keyed `<workspace>:<eventId>:<address>`): without them, a block removed
// before the upgrade came back when its bounce was handled again. An owner who removed such a
// block had a record written under the older form; the email's events are read in the canonical
// form (domain/email/upcast.ts), so a redelivered bounce (a crash before the offset commit,
// `relay parked retry`) asks for `<ws>:<event>:ann@example.org`: the pass's twin under that
// address skips it, and the list stays as the owner left it (suppression-sources.ts says why
// the records exist).
//
// Through the interfaces the scenario crosses: the email is sent over HTTP, its hard bounce is a
// DSN over real SMTP to the inbound server (no suppressor running, as in a process that had
// handled it before the upgrade), the pre-upgrade removal's record is what the older version
// wrote, the pass is the start's (prepareStores), the redelivery is the suppressor's handler on
// the event as read, and the list is read over HTTP.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import { applyAutomaticSuppression } from '../apps/services/feedback/auto-suppression.ts';
import { CANONICAL_ADDRESSES_MARK } from '../apps/services/management/canonical-addresses.ts';
import { markHandled } from '../apps/services/management/suppression-sources.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { originOfRequest } from '../domain/events/metadata.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { startTestInbound } from './support/inbound.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { deliverReport, dsn } from './support/reports.ts';

interface Ctx { t: TestApp; inbound: InboundServer; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('a block of a quoted address removed before the upgrade');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: [] });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@upgrade.test');
  ctx.inbound = await startTestInbound(ctx.t);
});
test.after(async (ctx) => {
  await ctx.inbound?.stop();
  await ctx.t?.close();
});

test('stays removed when its bounce is handled again after the upgrade', async ({ t, inbound, tenant, owner }) => {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: '"Ann"@example.org', subject: 'Hi', text: 'hi' });
  const returnPath = verpAddress({ emailId: id, recipientIndex: 0, mailFromDomain: `bounce.${tenant.domain}` }, (d) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
  await deliverReport(inbound.port, returnPath, dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' }));
  let bounce: Awaited<ReturnType<typeof readEmailStream>>[number] | undefined;
  await waitUntil(async () => {
    bounce = (await readEmailStream(t.stores.events, id)).find((e) => e.type === 'RecipientReported');
    return bounce !== undefined;
  }, 'the hard bounce is on the email\'s stream', 20_000);

  // Before the upgrade: the older version's suppressor blocked `"ann"@example.org` for this
  // bounce, and the owner removed that entry; removeSuppression then recorded the bounce as
  // handled under the entry's address, the older form.
  await markHandled(t.stores.documents, { workspaceId: tenant.workspaceId, eventId: bounce!.id, address: '"ann"@example.org' }, new Date());

  // The first start of the new version: the one-off pass runs.
  await t.stores.documents.collection(COLLECTIONS.checkpoints).delete(CANONICAL_ADDRESSES_MARK);
  await prepareStores(t.stores.documents);
  assert.is((await t.stores.documents.collection<{ _id: string; done: boolean }>(COLLECTIONS.checkpoints).get(CANONICAL_ADDRESSES_MARK))?.done, true, 'the pass ran');

  // The bounce comes again to the suppressor (at-least-once), read as every event is now.
  const again = (await readEmailStream(t.stores.events, id)).find((e) => e.id === bounce!.id)!;
  const added = await applyAutomaticSuppression(
    { events: t.stores.events, documents: t.stores.documents, secrets: t.ctx.services.secrets, now: () => new Date() },
    again, originOfRequest('redelivery'),
  );

  const list = (await call(t, 'GET', `/v1/workspaces/${tenant.workspaceId}/suppressions`, { as: owner })).json();
  assert.equal(list.suppressions.map((s: { address: string }) => s.address), [],
    `the owner removed this block before the upgrade, yet the same bounce handled again blocked it anew (${added} added)`);
});

test.run();
