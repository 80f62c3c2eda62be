// Body retention (spec: seven days): bodies and BCC are sealed in the event with a per-email
// key; after seven days the key is destroyed, and with it the body, wherever the event is.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { BODY_RETENTION_MS, ensureContentKeyIndexes, openContent, sealContent, shredExpiredContent } from '../apps/services/content-vault.ts';
import { startRetention } from '../apps/pipeline/retention.ts';

const test = suite('content retention');
const dir = mkdtempSync(join(tmpdir(), 'relay-retention-'));
const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
const events = new SqliteEventStore(join(dir, 'events.db'));
const t0 = new Date('2026-11-01T10:00:00.000Z');
const at = (ms: number) => new Date(t0.getTime() + ms);
const content = { html: '<p>secret body</p>', text: 'secret body', bcc: ['hidden@example.test'] };

test.before(() => ensureContentKeyIndexes(documents));
test.after(async () => {
  await documents.close();
  await events.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the sealed content holds neither the body nor the BCC in clear, and opens back within retention', async () => {
  const sealed = await sealContent(documents, 'em_a', content, t0);
  const raw = JSON.stringify(sealed);
  assert.not.ok(raw.includes('secret body') || raw.includes('hidden@example.test'));
  assert.equal(await openContent(documents, sealed, at(BODY_RETENTION_MS - 1)), content);
});

test('at seven days the content can no longer be opened, and the sweep destroys its key', async () => {
  const sealed = await sealContent(documents, 'em_b', content, t0);
  assert.is(await openContent(documents, sealed, at(BODY_RETENTION_MS)), null);
  assert.ok((await shredExpiredContent(documents, at(BODY_RETENTION_MS))) >= 1);
  // Even a clock set back cannot bring it back: the key is gone.
  assert.is(await openContent(documents, sealed, t0), null);
});

test('a sealed body of an email that is still within retention survives the sweep', async () => {
  const young = await sealContent(documents, 'em_c', content, at(BODY_RETENTION_MS));
  await shredExpiredContent(documents, at(BODY_RETENTION_MS + 1000));
  assert.equal(await openContent(documents, young, at(BODY_RETENTION_MS + 1000)), content);
});

test('the retention part sweeps at start', async () => {
  const sealed = await sealContent(documents, 'em_d', content, t0);
  let shredded = -1;
  const retention = await startRetention({ documents, events, deliveryPolicy: DELIVERY_POLICY, now: () => at(BODY_RETENTION_MS + 1), onShredded: (n) => (shredded = n) });
  await retention.stop();
  assert.ok(shredded >= 1);
  assert.is(await openContent(documents, sealed, t0), null);
});

test('the sweep runs every step whether or not it is told what each removed', async () => {
  const sealed = await sealContent(documents, 'em_e', content, t0);
  const retention = await startRetention({ documents, events, deliveryPolicy: DELIVERY_POLICY, now: () => at(BODY_RETENTION_MS + 1) });
  await retention.stop();
  assert.is(await openContent(documents, sealed, t0), null);
});

test.run();
