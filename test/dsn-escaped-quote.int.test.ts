// A DSN names its recipient as the reporting MTA spells it. An address whose quoted local part
// holds an escaped quote ("a\"b"@example.org) is accepted by admission and by the suppression
// API, and its canonical form (the SMTP envelope's) keeps the escape: a DSN that reports it
// failed 5.1.1, naming exactly that envelope address in Final-Recipient, comes back to its
// signed return path and must be a hard bounce that puts the address on the list. So must one
// that spells the recipient in another form of the same mailbox ("ann"@example.org for
// ann@example.org): a report's address and a recipient's are compared in canonical form.
// Otherwise the DSN counts as naming someone else (nothing recorded) or nobody ("undetermined"),
// nothing is suppressed, and the next send to the address goes out.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { deliverReport, dsn } from './support/reports.ts';

interface Ctx { t: TestApp; inbound: InboundServer; tenant: DeliveryTenant }
const test = suite<Ctx>('a hard bounce naming a quoted local part');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['suppressor'] });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.inbound = await startTestInbound(ctx.t);
});
test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
});

/**
 * Sends to `recipient`, delivers a DSN naming `named` failed 5.1.1 to its return path, and sends
 * to `recipient` again: the outcomes reported, the suppression entry's reason (the list keys the
 * canonical form `listed`), and the second send's status.
 */
async function bounceThenSendAgain({ t, inbound, tenant }: Ctx, recipient: string, named: string, listed: string) {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `<${recipient}>`, subject: 'Hi', text: 'hi' });
  const returnPath = verpAddress({ emailId: id, recipientIndex: 0, mailFromDomain: `bounce.${tenant.domain}` }, (d) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
  // Resolves on the 250, sent once the report is recorded.
  await deliverReport(inbound.port, returnPath, dsn({ recipient: named, action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${named}>: Recipient address rejected: User unknown` }));
  await processorsCaughtUp(t, ['suppressor']);
  const outcomes = (await t.stores.events.readStream(emailStreamId(id))).filter((e) => e.type === 'RecipientReported').map((e) => (e.data as { outcome: string }).outcome);
  const entry = await t.stores.documents.collection<{ _id: string; reason: string }>(COLLECTIONS.suppressions).get(`${tenant.workspaceId}:${listed}`);
  const next = await t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${tenant.key}` }, payload: { from: `hello@${tenant.domain}`, to: `<${recipient}>`, subject: 'Again', text: 'hi' } });
  return { outcomes, suppressed: entry?.reason ?? null, nextSend: next.json().status };
}

const hardBounced = { outcomes: ['hard_bounced'], suppressed: 'hard_bounce', nextSend: 'suppressed' };

test('DSN failed 5.1.1 for "a\\"b"@example.org: hard_bounced and suppressed', async (ctx) => {
  const address = '"a\\"b"@example.org'; // "a\"b"@example.org, its own canonical form
  assert.equal(await bounceThenSendAgain(ctx, address, address, address), hardBounced);
});

test('DSN failed 5.1.1 naming "Ann"@example.org for ann@example.org: hard_bounced and suppressed', async (ctx) => {
  assert.equal(await bounceThenSendAgain(ctx, 'ann@example.org', '"Ann"@example.org', 'ann@example.org'), hardBounced);
});

test.run();
