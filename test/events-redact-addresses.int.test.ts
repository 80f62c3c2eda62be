// `relay events export --redact` replaces every address Relay admits whole by its token (keyed by
// the installation's secret key, read by the command from the data directory's key file as the
// running Relay reads it), through the API and the export: a quoted local part ("john doe"@…) or
// one with an apostrophe (o'brien@…, an RFC 5322 dot-atom) in To, CC and Reply-To, the
// normalized address fields and the mailboxes alike (a recipient's display name goes with its
// address); the same address gives the same token wherever it stands, never a token of part of
// it (brien@… is another address), also written as a URL writes it in a List-Unsubscribe header
// or metadata (`?email=ann%40example.org`).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { addressTokens } from '../apps/services/event-reading.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite<{ t: TestApp; tenant: DeliveryTenant }>('relay events export --redact: admitted addresses');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'outbox' });
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  await ctx.t.close();
});

test('an address with a quoted local part or an apostrophe is replaced whole', async ({ t, tenant }) => {
  // The tokens the running Relay's own key gives: the command's must be these.
  const token = addressTokens(t.ctx.services.secrets);
  const quoted = '"john doe"@example.org';
  const apostrophe = "o'brien@example.org";
  const ccQuoted = '"ann smith"@example.net';
  const id = await send(t, tenant.key, {
    from: `hello@${tenant.domain}`, to: [`John <${quoted}>`, apostrophe], cc: [`Ann <${ccQuoted}>`], reply_to: `O'Brien <${apostrophe}>`, subject: 'Hi', text: 'hi',
  });
  const run = await runRelay(['events', 'export', '--redact'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(run.code, 0, run.stderr);
  const accepted = run.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((e) => e.streamId === `email-${id}` && e.type === 'EmailAccepted');
  assert.ok(accepted, run.stdout);
  for (const clear of ['john doe', 'ann smith', "o'brien", 'John', "O'Brien"]) {
    assert.not.ok(run.stdout.includes(clear), `${clear} is in clear: ${JSON.stringify(accepted.data)}`);
  }
  // The apostrophe one: replaced as a whole, not as brien@example.org (another address).
  assert.is(accepted.data.toAddresses[1], token(apostrophe), `o'brien@… redacted as ${accepted.data.toAddresses[1]}; brien@… would be ${token('brien@example.org')}`);
  assert.is(accepted.data.toAddresses[0], token(quoted));
  assert.equal(accepted.data.to, [token(quoted), token(apostrophe)], 'the mailboxes: the token of their address, the name gone');
  assert.equal([accepted.data.ccAddresses, accepted.data.cc], [[token(ccQuoted)], [token(ccQuoted)]]);
  assert.is(accepted.data.replyTo, token(apostrophe));
  assert.is(accepted.data.fromAddress, token(`hello@${tenant.domain}`));
});

test('an address URL-encoded in a header or the metadata is replaced as the address itself', async ({ t, tenant }) => {
  const recipient = 'ann.private@example.org';
  const link = `https://app.example/unsubscribe?email=${encodeURIComponent(recipient)}`;
  const id = await send(t, tenant.key, {
    from: `hello@${tenant.domain}`, to: recipient, subject: 'Your receipt', text: 'hi',
    headers: { 'List-Unsubscribe': `<${link}>` }, metadata: { unsubscribe: link },
  });
  const run = await runRelay(['events', 'export', '--redact'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(run.code, 0, run.stderr);
  const accepted = run.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((e) => e.streamId === `email-${id}` && e.type === 'EmailAccepted');
  assert.ok(accepted, run.stdout);
  assert.not.ok(run.stdout.includes('ann.private'), `the address is in clear: ${JSON.stringify([accepted.data.headers, accepted.data.metadata])}`);
  const replaced = `https://app.example/unsubscribe?email=${accepted.data.toAddresses[0]}`;
  assert.equal([accepted.data.headers, accepted.data.metadata], [{ 'List-Unsubscribe': `<${replaced}>` }, { unsubscribe: replaced }]);
});

test.run();
