// An address whose local part needs its quotes ("ann x"@example.org), which admission accepts
// and keeps quoted in its canonical form, is put on the suppression list by a hard bounce under
// that canonical form, and the management API takes it back everywhere an address is given to
// it: as the list's next_cursor (the next page answers 200) and in DELETE .../suppressions/:address
// (removed, 200). MANAGEMENT-API.md, Suppressions.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Ctx { sink: SmtpSink; t: TestApp; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('an automatically suppressed quoted address');

test.before(async (ctx) => {
  ctx.sink = await startSmtpSink({ onRcptTo: (address) => (address.address.includes(' ') ? smtpError(550, '5.1.1 No such user') : undefined) });
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@quoted.test');
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
});

test('a hard-bounced "ann x"@example.org is listed, can be removed by an owner, and pages past', async ({ t, tenant, owner }) => {
  const bounced = '"ann x"@example.org';
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: [`<${bounced}>`, 'zed@example.org'], subject: 'Hi', text: 'hi' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const base = `/v1/workspaces/${tenant.workspaceId}/suppressions`;
  let listed: Array<{ address: string; reason: string }> = [];
  await waitUntil(async () => (listed = (await call(t, 'GET', base, { as: owner })).json().suppressions).length > 0, 'the bounce is on the list');
  assert.equal(listed.map((s) => [s.address, s.reason]), [[bounced, 'hard_bounce']]);
  // A second entry after it, so that the quoted address is the cursor of a one-entry page.
  assert.is((await call(t, 'POST', base, { as: owner, body: { address: 'zzz@example.org' } })).statusCode, 201);
  const first = await call(t, 'GET', `${base}?limit=1`, { as: owner });
  const cursor = first.json().next_cursor as string;
  const second = await call(t, 'GET', `${base}?limit=1&cursor=${encodeURIComponent(cursor)}`, { as: owner });
  const removed = await call(t, 'DELETE', `${base}/${encodeURIComponent(bounced)}`, { as: owner });
  assert.equal(
    { cursor, nextPage: second.statusCode, remove: removed.statusCode },
    { cursor: bounced, nextPage: 200, remove: 200 },
    `next page: ${second.body}; remove: ${removed.body}`,
  );
});

test.run();
