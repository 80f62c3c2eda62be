// An API process reads a workspace's month of usage once however many ask for it at once: after
// a restart (nothing folded yet), 20 members' concurrent GET /v1/workspaces/:id/usage read the
// month's stream from its start once between them, not 20 times (the sqlite store reads on the
// event loop: a month of 200,000 charges is over a second each). Sharing a read never hides a
// charge: one asking while a read is under way also sees what was appended after that read
// began, and a read that failed is not anyone's answer for long: those who waited for it read
// again, once between them.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { UsageLedger } from '../apps/services/usage-ledger.ts';
import { monthOf, monthStart, usageStreamId } from '../domain/usage/quota.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant } from './support/delivery.ts';
import { call, workspaceOwner } from './support/management.ts';

const CHARGES = 2_000;

const charges = (month: string, count: number, from = 0) => Array.from({ length: count }, (_, i) => ({
  id: randomUUID(), type: 'RecipientsCharged',
  data: { emailId: `em_cold${from + i}`, fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false, recipients: 1, occurredAt: monthStart(month).toISOString() },
  metadata: { correlationId: 'test', causationId: 'test', schemaVersion: 1 },
}));

/** CHARGES charges appended to the workspace's stream of `month`, as admissions would have. */
async function chargedMonth(events: EventStore, workspaceId: string, month: string): Promise<string> {
  const stream = usageStreamId(workspaceId, month);
  await events.append(stream, charges(month, CHARGES), { expectedRevision: 'no_stream' });
  return stream;
}

/** The API restarted on `first`'s data directory (nothing folded yet), counting reads of `stream` from its start. */
async function restarted(first: TestApp, stream: string): Promise<{ t: TestApp; fullReads: () => number }> {
  const t = await startTestApp({}, { dataDir: first.config.dataDir, clock: first.clock });
  let reads = 0;
  const readStream = t.stores.events.readStream.bind(t.stores.events);
  t.stores.events.readStream = (streamId, options) => {
    if (streamId === stream && (options?.fromRevision ?? 0) === 0) reads++;
    return readStream(streamId, options);
  };
  return { t, fullReads: () => reads };
}

test('20 members\' concurrent GET /v1/workspaces/:id/usage after a restart read the month once, not 20 times', async () => {
  const first = await startTestApp();
  const tenant = await deliveryTenant(first);
  const owner = await workspaceOwner(first, tenant.workspaceId, 'cold-usage@example.test');
  const stream = await chargedMonth(first.stores.events, tenant.workspaceId, monthOf(first.ctx.now()));
  const { t, fullReads } = await restarted(first, stream);
  try {
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(t, 'GET', `/v1/workspaces/${tenant.workspaceId}/usage`, { as: owner })));
    for (const answer of answers) assert.is(answer.json().recipients.used, CHARGES, answer.body);
    assert.is(fullReads(), 1, `the month's usage stream was read from its start ${fullReads()} times for 20 concurrent requests`);
  } finally {
    await t.close();
    await first.close();
  }
});

/** The store, except that reads of `stream` wait for `release` (the first failing when `fail`), counting them. */
function heldReads(store: EventStore, stream: string, fail = false) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const reads: number[] = [];
  const readStream = store.readStream.bind(store);
  store.readStream = async (streamId, options) => {
    if (streamId !== stream) return readStream(streamId, options);
    const first = reads.push(options?.fromRevision ?? 0) === 1;
    const read = await readStream(streamId, options);
    await released;
    if (fail && first) throw new Error('connection lost');
    return read;
  };
  return { release, reads };
}

async function withLedger(run: (store: SqliteEventStore, ledger: UsageLedger) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-usage-shared-'));
  const store = new SqliteEventStore(join(dir, 'events.db'));
  const ledger = new UsageLedger(store);
  try {
    await run(store, ledger);
  } finally {
    ledger.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const AT = new Date('2026-11-22T10:00:00.000Z');

test('a usage asked while a read is under way also sees the charges appended after that read began', async () => {
  await withLedger(async (store, ledger) => {
    const stream = await chargedMonth(store, 'ws_shared', '2026-11');
    const { release, reads } = heldReads(store, stream);
    const early = ledger.usage('ws_shared', AT);
    while (reads.length === 0) await new Promise((resolve) => setImmediate(resolve));
    await store.append(stream, charges('2026-11', 5, CHARGES), { expectedRevision: CHARGES - 1 });
    const late = Promise.all([ledger.usage('ws_shared', AT), ledger.usage('ws_shared', AT)]);
    release();
    assert.is((await early).workspaceRecipients, CHARGES);
    assert.equal((await late).map((u) => u.workspaceRecipients), [CHARGES + 5, CHARGES + 5]);
    assert.equal(reads, [0, CHARGES], 'one read from the start; the later two read on from it, together');
  });
});

test('a shared read that fails is not the answer of those who waited for it: they read again, once between them', async () => {
  await withLedger(async (store, ledger) => {
    const stream = await chargedMonth(store, 'ws_failed', '2026-11');
    const { release, reads } = heldReads(store, stream, true);
    const asked = Array.from({ length: 5 }, () => ledger.usage('ws_failed', AT).then((u) => u.workspaceRecipients, (error: Error) => error.message));
    while (reads.length === 0) await new Promise((resolve) => setImmediate(resolve));
    release();
    assert.equal(await Promise.all(asked), ['connection lost', CHARGES, CHARGES, CHARGES, CHARGES]);
    assert.equal(reads, [0, 0]);
    assert.is((await ledger.usage('ws_failed', AT)).workspaceRecipients, CHARGES);
    assert.equal(reads, [0, 0, CHARGES], 'the fold is kept: later asks read on from it');
  });
});

test.run();
