// Defect: when the suppressor's handling of a hard bounce fails after it wrote the list entry and
// before its RecipientSuppressed was appended (one failed append to the event store, or a crash
// there), the handling that comes again (the runner's retry, a redelivery after the crash)
// finds the entry it wrote itself and only "settles" it: the RecipientSuppressed is never
// appended. The address stays blocked on the list while the workspace's suppression history
// (`suppressions-<workspaceId>`, what `relay events` and export print and what projections of
// one's own fold) never says it was blocked.
//
// Why it matters: docs/architecture.md says "every change of the list is an event" and
// docs/analysing-events.md offers these streams to build one's own read models; at-least-once
// redelivery exists to finish work a failed attempt left half done, and here the retry makes the
// gap permanent. Correct: once the suppressor has handled the bounce (its offset committed), the
// history holds exactly one RecipientSuppressed for the address, caused by that bounce, as it
// does when nothing fails (auto-suppression.ts: "the first handling may have stopped between its
// event and its settling" is handled, but not a stop between the entry and its event).
//
// Through real interfaces: the bounce is a DSN over real SMTP to the inbound server, the list is
// read over HTTP, the history with `relay events` in a child process; the one fault injected is a
// single failed append to the suppression stream (the store keeps answering, as after a network
// blip), which the processor runner retries as designed.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { suppressionStreamId } from '../domain/suppressions/events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { startTestInbound } from './support/inbound.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';
import { deliverReport, dsn } from './support/reports.ts';

interface Ctx { t: TestApp; inbound: InboundServer; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('a suppressor retry after its history append failed');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['suppressor'], onProcessorError: () => {} });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@history.test');
  ctx.inbound = await startTestInbound(ctx.t);
});
test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
});

test('the retried hard bounce still records RecipientSuppressed in the suppression history', async ({ t, inbound, tenant, owner }) => {
  const address = 'gone@example.org';
  // One append of the automatic block to the workspace's suppression stream fails; the store answers otherwise.
  const events = t.stores.events;
  const append = events.append;
  let failed = 0;
  events.append = async (streamId, list, options) => {
    if (failed === 0 && streamId === suppressionStreamId(tenant.workspaceId) && list[0]?.type === 'RecipientSuppressed') {
      failed++;
      throw new Error('connection reset by peer (injected: one failed append)');
    }
    return append.call(events, streamId, list, options);
  };
  try {
    const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: address, subject: 'Hi', text: 'hi' });
    const returnPath = verpAddress({ emailId: id, recipientIndex: 0, mailFromDomain: `bounce.${tenant.domain}` }, (d) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
    await deliverReport(inbound.port, returnPath, dsn({ recipient: address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' }));
    await waitUntil(() => failed === 1, 'the suppressor tried to record the block once and failed', 20_000);
    // The runner retries the record; the suppressor is done with it once its offset is committed.
    await processorsCaughtUp(t, ['suppressor']);
  } finally {
    events.append = append;
  }

  const list = (await call(t, 'GET', `/v1/workspaces/${tenant.workspaceId}/suppressions`, { as: owner })).json();
  assert.ok(list.suppressions.some((s: { address: string }) => s.address === address), 'the address is on the list');

  const printed = await runRelay(['events', '--prefix', 'suppressions-'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(printed.code, 0, printed.stderr);
  const history = printed.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line))
    .filter((e: { streamId: string; data: { address?: string } }) => e.streamId === suppressionStreamId(tenant.workspaceId) && e.data.address === address)
    .map((e: { type: string }) => e.type);
  assert.equal(history, ['RecipientSuppressed'], `the history of ${address} (relay events) records the block the list holds`);
});

test.run();
