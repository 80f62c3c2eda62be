// `relay events export --redact` gives one mailbox one token however it was written: a needlessly
// quoted local part ("john.doe"@example.org is john.doe@example.org, as Relay keys recipients in
// toAddresses, suppressions and outcomes) gets the token of its canonical form, so `to` joins `toAddresses`
// and `from` joins `fromAddress` (docs/analysing-events.md).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite<{ t: TestApp; tenant: DeliveryTenant }>('relay events export --redact: one address, one token');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'outbox' });
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  await ctx.t.close();
});

test('a recipient and a sender with needlessly quoted local parts get one token in their mailbox and address fields', async ({ t, tenant }) => {
  const id = await send(t, tenant.key, {
    from: `Hello <"hello"@${tenant.domain}>`, to: ['John <"john.doe"@example.org>'], subject: 'Hi', text: 'hi',
  });
  const run = await runRelay(['events', 'export', '--redact'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(run.code, 0, run.stderr);
  const accepted = run.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((e) => e.streamId === `email-${id}` && e.type === 'EmailAccepted');
  assert.ok(accepted, run.stdout);
  assert.is(accepted.data.to[0], accepted.data.toAddresses[0], `to ${accepted.data.to[0]} vs toAddresses ${accepted.data.toAddresses[0]}: one recipient, two tokens`);
  assert.is(accepted.data.from.replace(/^.*<|>$/g, ''), accepted.data.fromAddress, `from ${accepted.data.from} vs fromAddress ${accepted.data.fromAddress}`);
});

test.run();
