// Content keys at rest (apps/services/content-vault.ts): each email's key is stored sealed under
// Relay's secret key, for that email only, so the document store alone opens no body, and a key
// row moved onto another email opens nothing. Rows stored in clear before keys were sealed still
// open. The sender's re-seal pass (resealContentKeys) brings every live key under the current
// secret key, so that a previous key can be dropped without losing a body.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { BODY_RETENTION_MS, ensureContentKeyIndexes, openContent, resealContentKeys, sealContent, sealWith, takeContentKey, type ContentKey } from '../apps/services/content-vault.ts';
import { SecretBox, SecretBoxError } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

const test = suite('content keys sealed under the secret key');
const dir = mkdtempSync(join(tmpdir(), 'relay-content-key-sealing-'));
const documents = new SqliteDocumentStore(join(dir, 'relay.db'));
const keys = documents.collection<ContentKey>(COLLECTIONS.contentKeys);
const t0 = new Date('2026-11-01T10:00:00.000Z');
const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const secrets = new SecretBox({ current: oldKey, previous: [] });
const content = (n: number) => ({ html: null, text: `the code is ${n}`, bcc: [`hidden${n}@example.test`] });

test.before(() => ensureContentKeyIndexes(documents));
test.after(async () => {
  await documents.close();
  rmSync(dir, { recursive: true, force: true });
});

const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(
  (value) => assert.unreachable(`opened: ${JSON.stringify(value)}`),
  (error: unknown) => error,
);

test('a key is stored sealed, for its email only: moved onto another email it opens nothing', async () => {
  const first = await sealContent(documents, secrets, 'em_first', content(1), t0);
  const second = await sealContent(documents, secrets, 'em_second', content(2), t0);
  const firstRow = (await keys.get('em_first'))!;
  assert.ok(secrets.isSealed(firstRow.key), `stored as ${firstRow.key.slice(0, 12)}…`);
  assert.equal(await openContent(documents, secrets, first, t0), content(1));

  // em_first's row put in place of em_second's.
  const secondRow = (await keys.get('em_second'))!;
  assert.ok(await keys.replace({ _id: 'em_second', key: firstRow.key, expiresAt: secondRow.expiresAt }, secondRow._v));
  const error = await rejection(openContent(documents, secrets, second, t0));
  assert.instance(error, SecretBoxError);
  assert.match((error as Error).message, 'the content key of email em_second does not open');
});

test('a key stored in clear before keys were sealed still opens its body, and one taken over is stored sealed', async () => {
  const key = randomBytes(32).toString('base64');
  const expiresAt = new Date(t0.getTime() + BODY_RETENTION_MS).toISOString();
  await keys.insert({ _id: 'em_legacy', key, expiresAt });
  const sealed = sealWith({ _id: 'em_legacy', key, expiresAt }, content(3));
  assert.equal(await openContent(documents, secrets, sealed, t0), content(3));

  await keys.insert({ _id: 'em_legacy_left', key, expiresAt });
  const left = sealWith({ _id: 'em_legacy_left', key, expiresAt }, content(4));
  const taken = await takeContentKey(documents, secrets, 'em_legacy_left', new Date(t0.getTime() + 1_000));
  assert.is(taken.key.key, key, 'the material is kept: an attempt may have sealed with it');
  assert.ok(secrets.isSealed((await keys.get('em_legacy_left'))!.key));
  assert.equal(await openContent(documents, secrets, left, t0), content(4));
});

test('the re-seal pass brings every live key under the current secret key: after it, the previous key is not needed', async () => {
  const at = new Date(t0.getTime() + 60_000);
  const rotated = new SecretBox({ current: newKey, previous: [oldKey] });
  const newOnly = new SecretBox({ current: newKey, previous: [] });
  const underOld = await Promise.all([0, 1, 2].map((n) => sealContent(documents, secrets, `em_old_${n}`, content(10 + n), t0)));
  const underNew = await sealContent(documents, rotated, 'em_new', content(20), t0);
  // Past its retention, not swept yet: left to the sweep.
  await sealContent(documents, secrets, 'em_expired', content(30), new Date(t0.getTime() - BODY_RETENTION_MS));
  // Under a key Relay no longer has.
  await sealContent(documents, new SecretBox({ current: randomBytes(32), previous: [] }), 'em_lost', content(40), t0);
  const error = await rejection(openContent(documents, newOnly, underOld[0], at));
  assert.instance(error, SecretBoxError, 'control: the new key alone does not open a key sealed under the old one');

  const outcome = await resealContentKeys(documents, rotated, () => at);
  // em_first, em_second (moved: it does not open), em_legacy, em_legacy_left, em_old_0..2, em_lost.
  assert.equal([outcome?.changed, outcome?.unopenableCount, outcome?.remaining], [6, 2, 2]);
  assert.equal(outcome?.unopenable.map((u) => u.emailId).sort(), ['em_lost', 'em_second']);
  for (const [n, sealed] of underOld.entries()) assert.equal(await openContent(documents, newOnly, sealed, at), content(10 + n));
  assert.equal(await openContent(documents, newOnly, underNew, at), content(20));
  assert.is((await keys.get('em_expired'))!.key.split('.')[1], secrets.keyId, 'an expired key is left as it is');

  const again = await resealContentKeys(documents, rotated, () => at);
  assert.equal([again?.changed, again?.remaining], [0, 2], 'a second pass finds nothing more to do');
});

test('a pass whose signal aborts ends before its next page, with no outcome', async () => {
  const abort = new AbortController();
  abort.abort();
  assert.is(await resealContentKeys(documents, secrets, () => t0, abort.signal), null);
});

test.run();
