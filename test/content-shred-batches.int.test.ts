// The retention sweep destroys expired content keys a batch at a time, each batch's deletes in
// one deferred-durability scope: they share a commit and a WAL sync. One sync per key (about 600
// keys a second on a common disk, against the 1,400-1,700 admissions a second
// docs/performance.md measures, which store their keys group-committed) let the sweep fall
// behind for good under sustained traffic, and bodies outlived their seven days. (A key renewed
// after the sweep listed it still survives: test/content-retention.int.test.ts.)
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { BODY_RETENTION_MS, ensureContentKeyIndexes, shredExpiredContent, takeContentKey, type ContentKey } from '../apps/services/content-vault.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

const test = suite('content key shredding in batches');

test('destroying 1,000 expired keys costs a few WAL syncs, not one per key', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-shred-batches-'));
  let syncs = 0;
  const documents = new SqliteDocumentStore(join(dir, 'relay.db'), { commitHold: async ({ stage }) => { if (stage === 'sync') syncs++; } });
  try {
    await ensureContentKeyIndexes(documents);
    const t0 = new Date('2026-11-01T10:00:00.000Z');
    const N = 1_000;
    const secrets = new SecretBox({ current: randomBytes(32), previous: [] });
    // As admissions store them: concurrently, group-committed.
    await deferDurability(async () => { await Promise.all(Array.from({ length: N }, (_, i) => takeContentKey(documents, secrets, `em_${i}`, t0))); });
    const admissionSyncs = syncs;
    syncs = 0;
    const started = Date.now();
    const removed = await shredExpiredContent(documents, new Date(t0.getTime() + BODY_RETENTION_MS + 1));
    const tookMs = Date.now() - started;
    assert.is(removed, N);
    assert.equal(await documents.collection<ContentKey>(COLLECTIONS.contentKeys).find({ limit: 1 }), [], 'every key is gone');
    assert.ok(syncs <= 20, `the sweep synced the WAL ${syncs} times for ${N} keys (${tookMs} ms); storing them took ${admissionSyncs}`);
  } finally {
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
