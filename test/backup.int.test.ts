// `relay backup <directory>` (apps/cli/backup-command.ts), run as ops run it, beside a Relay that
// admits and delivers meanwhile: the copy is a data directory a Relay starts on, holding every
// email answered 202 before the backup began, each readable (the secret key came along) and each
// sent one's outbox message; sqlite's own integrity check passes on it. A copy made without the
// key opens no body or BCC: the content keys in relay.db are sealed under the secret key. With
// RELAY_SECRET_KEY set, the report names it as the key to keep, and an older secret.key as the
// previous key it is. What it refuses: a target that is not new or empty, or that cannot be made,
// a data directory whose stores are in separate files, the distributed stores.
import { createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { openContent, type ContentKey } from '../apps/services/content-vault.ts';
import { dkimPrivateKeyOf } from '../apps/services/dkim-key-vault.ts';
import type { SealedContent } from '../domain/email/events.ts';
import type { SendingDomain } from '../domain/management.ts';
import { loadConfig } from '../infra/config.ts';
import { loadSecretKeys, parseKey, SecretBox, SecretBoxError } from '../infra/secrets/secret-box.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { exitWithin, runRelay, spawnRelay } from './support/relay-process.ts';
import { secretsOf } from './support/secrets.ts';

interface Ctx { t: TestApp; tenant: DeliveryTenant; scratch: string }

const test = suite<Ctx>('relay backup');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'outbox' }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.scratch = mkdtempSync(join(tmpdir(), 'relay-backup-'));
});

test.after(async (ctx) => {
  await ctx.t.close();
  rmSync(ctx.scratch, { recursive: true, force: true });
});

const email = (tenant: DeliveryTenant, n: number) => ({ from: `app@${tenant.domain}`, to: `user${n}@example.org`, subject: `order ${n}`, text: `body of order ${n}` });

test('a backup taken while Relay admits is a data directory holding every email admitted before it, readable, with the outbox', async ({ t, tenant, scratch }) => {
  const sent: string[] = [];
  for (let n = 0; n < 5; n++) sent.push(await send(t, tenant.key, email(tenant, n)));
  for (const id of sent) await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent');

  // Admissions go on while the backup runs; those answered before it starts must all be in it.
  const admitted = [...sent];
  let sending = true;
  const during = (async () => {
    for (let n = 100; sending; n++) admitted.push(await send(t, tenant.key, email(tenant, n)));
  })();
  while (admitted.length < sent.length + 10) await new Promise((resolve) => setImmediate(resolve));
  const admittedBefore = new Set(admitted);
  const target = join(scratch, 'copy');
  const run = await runRelay(['backup', target], { RELAY_DATA_DIR: t.config.dataDir });
  sending = false;
  await during;
  assert.ok(admitted.length > admittedBefore.size, 'admissions went on while the backup ran');
  assert.is(run.code, 0, run.stderr);
  assert.match(run.stdout, /relay\.db: [\d.]+ MiB, as it was at \d{4}-/);
  assert.match(run.stdout, /secret\.key: copied/);
  assert.match(run.stdout, /outbox: \d+ messages\n/);
  assert.equal(readdirSync(target).sort(), ['outbox', 'relay.db', 'secret.key']);

  const db = new DatabaseSync(join(target, 'relay.db'), { readOnly: true });
  assert.is((db.prepare('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check, 'ok');
  db.close();

  const restored = await startTestApp({ RELAY_DELIVERY: 'outbox' }, { dataDir: target });
  try {
    for (const id of admittedBefore) {
      const found = await detail(restored, tenant.key, id);
      assert.is(found.id, id);
    }
    for (const id of sent) {
      assert.is((await detail(restored, tenant.key, id)).status, 'sent');
      assert.ok(existsSync(join(target, 'outbox', `${id}.eml`)), `${id}'s message is in the backup's outbox`);
    }
    // The key came along: the restored Relay opens a body it sealed.
    const show = await runRelay(['outbox', 'show', sent[0]], { RELAY_DATA_DIR: target });
    assert.is(show.code, 0, show.stderr);
    assert.match(show.stdout, /body of order 0/);
    // And it admits on.
    assert.match(await send(restored, tenant.key, email(tenant, 999)), /^em_/);
  } finally {
    await restored.close();
  }
});

/** What anyone holding relay.db alone can try: the key row's value as the body's AES key (null: it does not open). */
function openWithStoredKey(stored: string, sealed: SealedContent): string | null {
  const key = Buffer.from(stored, 'base64');
  if (key.length !== 32) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAAD(Buffer.from(sealed.keyId));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

test('--without-secret-key leaves out the key and the outbox (its messages are in clear); relay.db alone opens no body or BCC, the key kept apart does', async ({ t, tenant, scratch }) => {
  const id = await send(t, tenant.key, { from: `app@${tenant.domain}`, to: 'user@example.org', bcc: 'hidden-boss@example.org', subject: 'reset', text: 'your one-time code is 918273' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent');
  assert.ok(readdirSync(join(t.config.dataDir, 'outbox')).some((name) => name.endsWith('.eml')), 'control: the data directory has outbox messages');
  const target = join(scratch, 'keyless');
  const run = await runRelay(['backup', target, '--without-secret-key'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(run.code, 0, run.stderr);
  assert.equal(readdirSync(target), ['relay.db']);
  assert.match(run.stdout, /secret\.key: left out \(--without-secret-key\)/);
  assert.match(run.stdout, 'relay.db, without the key: its message bodies and BCC stay sealed, but the rest is in clear (addresses, subjects, headers, tags, metadata, events), readable by whoever holds the copy');
  assert.match(run.stdout, /outbox: left out \(--without-secret-key\): its messages are in clear/);
  assert.match(run.stdout, /the key file kept apart put back in it as secret\.key/);

  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: target, RELAY_LOG_LEVEL: 'silent' }), { withoutLog: true });
  try {
    const [accepted] = await stores.events.readStream(`email-${id}`, { maxCount: 1 });
    assert.is(accepted.type, 'EmailAccepted');
    const sealed = accepted.data.content as SealedContent;
    const stored = await stores.documents.collection<ContentKey>(COLLECTIONS.contentKeys).get(id);
    assert.ok(stored, 'control: the backup holds the email\'s content key');
    assert.is(openWithStoredKey(stored.key, sealed), null, 'the content key as stored opens the body');
    const otherKey = new SecretBox({ current: randomBytes(32), previous: [] });
    await openContent(stores.documents, otherKey, sealed, new Date()).then(
      (opened) => assert.unreachable(`another secret key opened the body: ${JSON.stringify(opened)}`),
      (error: unknown) => assert.instance(error, SecretBoxError),
    );
    // With the key kept apart, the backup is whole.
    const opened = await openContent(stores.documents, await secretsOf(t.config.dataDir), sealed, new Date());
    assert.equal([opened?.text, opened?.bcc], ['your one-time code is 918273', ['hidden-boss@example.org']]);
  } finally {
    await stores.close();
  }
});

test('with RELAY_SECRET_KEY set beside an older secret.key: the report names RELAY_SECRET_KEY as the key to keep and restore with, and the file as the earlier key', async ({ scratch }) => {
  const dataDir = join(scratch, 'env-key-data');
  // A first start without the variable made secret.key; the operator then set RELAY_SECRET_KEY.
  await (await startTestApp({}, { dataDir })).close();
  const fileKeyId = new SecretBox(await loadSecretKeys({ dataDir })).keyId;
  const envKey = randomBytes(32).toString('base64');
  const envKeyId = new SecretBox({ current: parseKey(envKey), previous: [] }).keyId;
  const previousKey = randomBytes(32).toString('base64');
  const previousKeyId = new SecretBox({ current: parseKey(previousKey), previous: [] }).keyId;
  const t = await startTestApp({ RELAY_SECRET_KEY: envKey }, { dataDir });
  const tenant = await deliveryTenant(t, 'env-key.example.test'); // its DKIM key sealed under RELAY_SECRET_KEY
  await t.close();

  const target = join(scratch, 'env-key-copy');
  const run = await runRelay(['backup', target], { RELAY_DATA_DIR: dataDir, RELAY_SECRET_KEY: envKey, RELAY_SECRET_KEY_PREVIOUS: previousKey });
  assert.is(run.code, 0, run.stderr);
  assert.equal(readdirSync(target).sort(), ['relay.db', 'secret.key'], 'the earlier key file is copied');
  assert.match(run.stdout, `secret key: RELAY_SECRET_KEY (key ${envKeyId}) opens the sealed message bodies and BCC, DKIM keys and webhook secrets (RELAY_SECRET_KEY_PREVIOUS, key ${previousKeyId}: `);
  assert.match(run.stdout, `secret.key: copied; it holds an earlier key (${fileKeyId}), not RELAY_SECRET_KEY`);
  assert.not.match(run.stdout, /secret\.key: copied; it opens/);
  assert.match(run.stdout, `to restore: stop Relay, then start it with RELAY_DATA_DIR=${target} and RELAY_SECRET_KEY and RELAY_SECRET_KEY_PREVIOUS set as now`);
  for (const key of [envKey, previousKey]) assert.not.ok(run.stdout.includes(key), 'a key in the report');

  const domainOf = async (app: TestApp) => (await app.ctx.documents.collection<SendingDomain>(COLLECTIONS.domains).find({ where: { name: tenant.domain }, limit: 1 }))[0];
  // Restored with the data directory alone, Relay would run on the file's key, which opens nothing RELAY_SECRET_KEY sealed.
  const fileOnly = new SecretBox(await loadSecretKeys({ dataDir: target }));
  // Restored as the report says, it does.
  const restored = await startTestApp({ RELAY_SECRET_KEY: envKey }, { dataDir: target });
  try {
    const domain = await domainOf(restored);
    assert.throws(() => dkimPrivateKeyOf(domain, fileOnly), (error: unknown) => error instanceof SecretBoxError);
    assert.match(dkimPrivateKeyOf(domain, restored.ctx.services.secrets), /BEGIN PRIVATE KEY/);
  } finally {
    await restored.close();
  }
});

test('refused: a target that is not new or empty, one inside the data directory, split stores, distributed stores', async ({ t, scratch }) => {
  const full = join(scratch, 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'something'), 'x');
  const notEmpty = await runRelay(['backup', full], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(notEmpty.code, 2);
  assert.match(notEmpty.stderr, /exists and is not an empty directory/);
  assert.equal(readdirSync(full), ['something']);

  const inside = await runRelay(['backup', join(t.config.dataDir, 'backup')], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(inside.code, 2);
  assert.match(inside.stderr, /outside the data directory/);

  // Where mkdir answers ENOENT under a directory that exists, a recursive mkdir never returns.
  if (process.platform === 'linux') {
    const procfs = spawnRelay(['backup', '/proc/relay-backup/copy'], { RELAY_DATA_DIR: t.config.dataDir });
    assert.is(await exitWithin(procfs, 10_000), 1, procfs.output());
    assert.match(procfs.output(), 'relay: cannot make the backup directory /proc/relay-backup/copy: ENOENT');
  }

  const split = join(scratch, 'split');
  mkdirSync(split);
  for (const file of ['events.db', 'documents.db']) new DatabaseSync(join(split, file)).close();
  const old = await runRelay(['backup', join(scratch, 'of-split')], { RELAY_DATA_DIR: split });
  assert.is(old.code, 1);
  assert.match(old.stderr, /separate files .* stop every Relay process on it, then copy the whole directory/);
  assert.not.ok(existsSync(join(scratch, 'of-split')));

  const distributed = await runRelay(['backup', join(scratch, 'of-mongo')], { RELAY_DATA_DIR: t.config.dataDir, RELAY_MONGODB_URL: 'mongodb://127.0.0.1:1/relay' });
  assert.is(distributed.code, 1);
  assert.match(distributed.stderr, /back up EventStoreDB, MongoDB and Kafka with their own tools/);

  const usage = await runRelay(['backup'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(usage.code, 2);
  assert.match(usage.stderr, /usage: relay backup <directory>/);
});

test.run();
