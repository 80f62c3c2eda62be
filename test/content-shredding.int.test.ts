// Crypto-shredding must shred: once retention deleted a content key, the key's bytes must not
// be readable anywhere in the embedded document store's files (documents.db, its WAL), or the
// body it sealed is recoverable from every copy of the event store by anyone who can read the
// data directory. Without secure_delete a deleted row stays in a free block of its page; without
// a WAL truncation the page as it was before the deletion stays in documents.db-wal.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { BODY_RETENTION_MS, ensureContentKeyIndexes, openContent, sealContent, shredExpiredContent } from '../apps/services/content-vault.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

const test = suite('content shredding on disk');
const t0 = new Date('2026-11-01T10:00:00.000Z');
const at = (ms: number) => new Date(t0.getTime() + ms);
const secrets = new SecretBox({ current: randomBytes(32), previous: [] });
const content = { html: '<p>the code is 482913</p>', text: 'the code is 482913', bcc: ['hidden@example.test'] };

/** Where in these files the key appears, as its stored base64 text or as raw bytes. */
function findKey(path: string, key: string): string[] {
  const files = [path, `${path}-wal`].filter(existsSync);
  const needles: Array<[string, Buffer]> = [['base64', Buffer.from(key, 'utf8')], ['raw', Buffer.from(key, 'base64')]];
  return files.flatMap((file) => {
    const bytes = readFileSync(file);
    return needles.filter(([, needle]) => bytes.includes(needle)).map(([form]) => `${form} in ${file.slice(file.lastIndexOf('/') + 1)}`);
  });
}

async function keyOf(documents: SqliteDocumentStore, emailId: string): Promise<string> {
  const stored = await documents.collection<{ _id: string; key: string }>(COLLECTIONS.contentKeys).get(emailId);
  assert.ok(stored, `a key for ${emailId}`);
  return stored.key;
}

/** Other emails' keys and documents around the one shredded, still within retention at the sweep. */
async function neighbours(documents: SqliteDocumentStore, prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await sealContent(documents, secrets, `${prefix}_${i}`, content, at(BODY_RETENTION_MS));
}

for (const where of ['in the database file (checkpointed before the sweep)', 'only in the WAL (never checkpointed)']) {
  test(`a shredded key is found in neither documents.db nor its WAL, open or closed: key ${where}`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-shred-'));
    const path = join(dir, 'documents.db');
    try {
      let documents = new SqliteDocumentStore(path);
      await ensureContentKeyIndexes(documents);
      await neighbours(documents, 'em_before', 20);
      const sealed = await sealContent(documents, secrets, 'em_shredded', content, t0);
      await neighbours(documents, 'em_after', 20);
      const key = await keyOf(documents, 'em_shredded');
      if (where.startsWith('in the database')) {
        // Closing the only connection checkpoints the WAL into documents.db and removes it.
        await documents.close();
        documents = new SqliteDocumentStore(path);
        await neighbours(documents, 'em_reopened', 5);
      }
      assert.ok(findKey(path, key).length > 0, 'the scan finds a key that is still there');

      assert.is(await shredExpiredContent(documents, at(BODY_RETENTION_MS + 1)), 1);
      assert.is(await openContent(documents, secrets, sealed, t0), null);
      assert.equal(findKey(path, key), [], 'while the store is open');
      // Later writes and the close's own checkpoint bring nothing back.
      await neighbours(documents, 'em_later', 5);
      await documents.close();
      assert.equal(findKey(path, key), [], 'after the store is closed');
      // The other emails' keys are intact.
      documents = new SqliteDocumentStore(path);
      assert.equal(await openContent(documents, secrets, await sealContent(documents, secrets, 'em_after_0', content, at(BODY_RETENTION_MS)), at(BODY_RETENTION_MS)), content);
      await documents.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test.run();
