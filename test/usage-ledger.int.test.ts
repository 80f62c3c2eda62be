// The usage ledger on a real event store: several ledgers (the caches of several API
// processes) charging one workspace at once never pass its allowance, and each sees the
// others' charges.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { UsageLedger, type RecipientCharge } from '../apps/services/usage-ledger.ts';
import { RelayError } from '../domain/errors.ts';
import { DEFAULT_ALLOWANCES, usageStreamId } from '../domain/usage/quota.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { commitsFor } from '../infra/sqlite/group-commit.ts';
import { commitHoldSwitch } from './support/commit-hold.ts';
import { waitUntil } from './support/eventually.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import type { EventStore } from '../infra/ports/event-store.ts';

const test = suite('usage ledger (sqlite event store, several processes)');
const dir = mkdtempSync(join(tmpdir(), 'relay-ledger-'));
// Two connections to one file, as two processes have.
const holds = commitHoldSwitch();
const storeA = new SqliteEventStore(join(dir, 'events.db'), { commitHold: holds.hold });
const storeB = new SqliteEventStore(join(dir, 'events.db'));
const AT = new Date('2026-11-22T10:00:00.000Z');

test.after(async () => {
  await storeA.close();
  await storeB.close();
  rmSync(dir, { recursive: true, force: true });
});

const charge = (workspaceId: string, recipients: number, overrides: Partial<RecipientCharge> = {}): RecipientCharge => ({
  workspaceId, emailId: `em_${randomUUID()}`, fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false, recipients, allowances: DEFAULT_ALLOWANCES, at: AT, origin: { correlationId: 'test', causationId: 'test' }, ...overrides,
});

async function outcome(promise: Promise<void>): Promise<'ok' | 'quota_exceeded'> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (error instanceof RelayError && error.code === 'quota_exceeded') return 'quota_exceeded';
    throw error;
  }
}

test('charges made through one ledger are seen by another, which decides on them', async () => {
  const a = new UsageLedger(storeA);
  const b = new UsageLedger(storeB);
  await a.charge(charge('ws_seen', 4_000));
  await b.charge(charge('ws_seen', 999));
  assert.is((await a.usage('ws_seen', AT)).workspaceRecipients, 4_999);
  // a's cache is behind (it never saw b's charge): its append conflicts, it catches up, refuses.
  assert.is(await outcome(a.charge(charge('ws_seen', 2))), 'quota_exceeded');
  assert.is(await outcome(a.charge(charge('ws_seen', 1))), 'ok');
  assert.is((await b.usage('ws_seen', AT)).workspaceRecipients, 5_000);
});

test('at the edge, 2 ledgers × 30 parallel charges of 1 from 4,980 admit exactly 20', async () => {
  const seed = new UsageLedger(storeA);
  await seed.charge(charge('ws_edge', 4_980));
  const ledgers = [new UsageLedger(storeA), new UsageLedger(storeB)];
  // Warm both caches first, so the race is between stale caches, not fresh reads.
  await Promise.all(ledgers.map((l) => l.usage('ws_edge', AT)));
  const results = await Promise.all(Array.from({ length: 60 }, (_, i) => outcome(ledgers[i % 2].charge(charge('ws_edge', 1)))));
  assert.is(results.filter((r) => r === 'ok').length, 20);
  const events = await storeA.readStream(usageStreamId('ws_edge', '2026-11'));
  assert.is(events.reduce((sum, e) => sum + Number(e.data.recipients), 0), 5_000);
});

test('development keys: parallel charges of one key across ledgers stop at exactly 1,000', async () => {
  const ledgers = [new UsageLedger(storeA), new UsageLedger(storeB), new UsageLedger(storeA)];
  await ledgers[0].charge(charge('ws_dev', 990, { apiKeyId: 'key_dev', developmentKey: true }));
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => outcome(ledgers[i % 3].charge(charge('ws_dev', 1, { apiKeyId: 'key_dev', developmentKey: true })))));
  assert.is(results.filter((r) => r === 'ok').length, 10);
  assert.is((await ledgers[1].usage('ws_dev', AT)).byKey.key_dev, 1_000);
});

test('a retried admission (same email and request) is charged once, in whichever process retries it', async () => {
  const a = new UsageLedger(storeA);
  const b = new UsageLedger(storeB);
  const once = charge('ws_retry', 3, { emailId: 'em_retried' });
  await Promise.all([a.charge(once), b.charge(once), a.charge(once), b.charge(once)]);
  assert.is((await a.usage('ws_retry', AT)).workspaceRecipients, 3);
  assert.is((await storeA.readStream(usageStreamId('ws_retry', '2026-11'))).length, 1);
});

test('each UTC month is its own stream: a full November does not limit December', async () => {
  const a = new UsageLedger(storeA);
  await a.charge(charge('ws_month', 5_000));
  assert.is(await outcome(a.charge(charge('ws_month', 1))), 'quota_exceeded');
  const december = new Date('2026-12-01T00:00:00.000Z');
  assert.is(await outcome(a.charge(charge('ws_month', 5_000, { at: december }))), 'ok');
  assert.is((await a.usage('ws_month', december)).workspaceRecipients, 5_000);
  assert.is((await a.usage('ws_month', AT)).workspaceRecipients, 5_000);
});

test('charges queued while an append is in flight go out together: fewer appends than charges', async () => {
  let appends = 0;
  const counting: EventStore = {
    append: (...args) => (appends++, storeA.append(...args)),
    readStream: (...args) => storeA.readStream(...args),
    readAll: (...args) => storeA.readAll(...args),
    countAfter: (...args) => storeA.countAfter(...args),
    subscribeAll: (...args) => storeA.subscribeAll(...args),
    ping: () => storeA.ping(),
    close: async () => {},
  };
  const a = new UsageLedger(counting);
  await Promise.all(Array.from({ length: 40 }, () => a.charge(charge('ws_batch', 1))));
  assert.is((await storeA.readStream(usageStreamId('ws_batch', '2026-11'))).length, 40);
  assert.ok(appends < 40, `${appends} appends for 40 charges`);
});

test('a charge given to a durability scope whose batch then fails to commit is forgotten: later charges decide on the stream', async () => {
  const ledger = new UsageLedger(storeA);
  try {
    await ledger.charge(charge('ws_lost', 100));
    // Its drain ends a few microtasks after the charge resolves: the next charge starts a new one.
    await new Promise((resolve) => setImmediate(resolve));
    let given = false;
    holds.set(async ({ stage }) => {
      if (stage === 'commit') throw new Error('disk on fire');
    });
    const lost = await deferDurability(async () => {
      await ledger.charge(charge('ws_lost', 4_000));
      given = true;
    }).then(() => 'ok', (error: Error) => error.message).finally(() => holds.set(null));
    assert.ok(given, 'the charge was given to the scope before its commit');
    assert.is(lost, 'disk on fire');
    // A ledger that still counted the lost 4,000 would refuse this one (9,000 > 5,000).
    assert.is(await outcome(ledger.charge(charge('ws_lost', 4_900))), 'ok');
    assert.is((await ledger.usage('ws_lost', AT)).workspaceRecipients, 5_000);
  } finally {
    holds.set(null);
    ledger.close();
  }
});

test('a charge whose batch fails inside the write that filled it (its size bound) is not remembered: the retry is charged', async () => {
  const db = openDatabase(join(dir, 'size-bound.db'));
  // A deferred foreign key makes COMMIT itself fail, at once, as a full disk would.
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('CREATE TABLE parent (id INTEGER PRIMARY KEY); CREATE TABLE child (pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED); CREATE TABLE filler (v INTEGER)');
  const store = new SqliteEventStore(db);
  const ledger = new UsageLedger(store);
  const commits = commitsFor(db);
  try {
    await deferDurability(() => ledger.charge(charge('ws_bound', 1, { emailId: 'em_warm' })));
    const others: Promise<unknown>[] = [commits.run(() => db.exec('INSERT INTO child (pid) VALUES (42)'))];
    const filler = db.prepare('INSERT INTO filler (v) VALUES (1)');
    for (let i = 0; i < 510; i++) others.push(commits.run(() => filler.run()));
    // The charge is the batch's 512th write: the batch commits, and fails, inside it.
    const first = await deferDurability(() => ledger.charge(charge('ws_bound', 1, { emailId: 'em_lost' }))).then(() => 'ok', (e: Error) => e.message);
    await Promise.allSettled(others);
    assert.match(first, /FOREIGN KEY/);
    await deferDurability(() => ledger.charge(charge('ws_bound', 1, { emailId: 'em_lost' })));
    const charged = (await store.readStream(usageStreamId('ws_bound', '2026-11')))
      .filter((e) => e.type === 'RecipientsCharged' && (e.data as { emailId: string }).emailId === 'em_lost');
    assert.is(charged.length, 1, 'the retry was answered as charged already');
  } finally {
    ledger.close();
    await store.close();
    db.close();
  }
});

test('a charge appended by a drain another admission started still holds its own admission until durable', async () => {
  const ledger = new UsageLedger(storeA);
  const releases: Array<() => void> = [];
  try {
    await ledger.charge(charge('ws_scopes', 1)); // the stream is folded: the charges below only append
    await new Promise((resolve) => setImmediate(resolve)); // and that charge's drain has ended
    holds.set(({ stage }) => stage === 'sync' ? new Promise<void>((resolve) => releases.push(resolve)) : Promise.resolve());
    const given = { first: false, second: false };
    const settled = { first: false, second: false };
    // The first admission's charge starts the drain; the second's is queued behind it and
    // appended in a later batch by that same drain, in the first admission's async context.
    const first = deferDurability(async () => {
      await ledger.charge(charge('ws_scopes', 1));
      given.first = true;
    }).finally(() => (settled.first = true));
    const second = deferDurability(async () => {
      await ledger.charge(charge('ws_scopes', 1));
      given.second = true;
    }).finally(() => (settled.second = true));
    await waitUntil(() => given.second, 'the second charge was given to its scope', 5_000).catch(() => {});
    assert.ok(given.first && given.second, `both charges were given to their scopes before any sync ${JSON.stringify({ given, settled })}`);
    await waitUntil(() => releases.length > 0, 'the sync of the charges is held');
    await new Promise((resolve) => setImmediate(resolve));
    assert.not.ok(settled.second, 'the second admission settled while the sync of its charge was held');
    assert.not.ok(settled.first, 'the first admission settled while the sync of its charge was held');
    holds.set(null);
    for (const release of releases.splice(0)) release();
    await Promise.all([first, second]);
    assert.is((await ledger.usage('ws_scopes', AT)).workspaceRecipients, 3);
  } finally {
    holds.set(null);
    for (const release of releases.splice(0)) release();
    ledger.close();
  }
});

test.run();
