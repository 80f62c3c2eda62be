// `relay backup <directory>` (apps/cli/backup-command.ts), run as ops run it, beside a Relay that
// admits and delivers meanwhile: the copy is a data directory a Relay starts on, holding every
// email answered 202 before the backup began, each readable (the secret key came along) and each
// sent one's outbox message; sqlite's own integrity check passes on it. What it refuses: a target
// that is not new or empty, a data directory whose stores are in separate files, the distributed
// stores.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { runRelay } from './support/relay-process.ts';

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

test('--without-secret-key leaves out the key and the outbox (its messages are in clear), and says so', async ({ t, scratch }) => {
  assert.ok(readdirSync(join(t.config.dataDir, 'outbox')).some((name) => name.endsWith('.eml')), 'control: the data directory has outbox messages');
  const target = join(scratch, 'keyless');
  const run = await runRelay(['backup', target, '--without-secret-key'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(run.code, 0, run.stderr);
  assert.equal(readdirSync(target), ['relay.db']);
  assert.match(run.stdout, /secret\.key: left out \(--without-secret-key\)/);
  assert.match(run.stdout, /outbox: left out \(--without-secret-key\): its messages are in clear/);
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
