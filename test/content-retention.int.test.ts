// Body retention (spec: seven days): bodies and BCC are sealed in the event with a per-email
// key; after seven days the key is destroyed, and with it the body, wherever the event is. A
// key an earlier attempt left is taken over with a fresh seven days (takeContentKey); a refused
// admission gives back only a key it made and nobody took over; neither a give-back nor the
// sweep removes a key that was taken over after they looked at it.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { BODY_RETENTION_MS, contentKeyState, ensureContentKeyIndexes, giveBackContentKey, openContent, sealContent, sealWith, shredExpiredContent, takeContentKey, type ContentKey } from '../apps/services/content-vault.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import { startRetention } from '../apps/pipeline/retention.ts';

const test = suite('content retention');
const dir = mkdtempSync(join(tmpdir(), 'relay-retention-'));
const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
const events = new SqliteEventStore(join(dir, 'events.db'));
const secrets = new SecretBox({ current: randomBytes(32), previous: [] });
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
  const sealed = await sealContent(documents, secrets, 'em_a', content, t0);
  const raw = JSON.stringify(sealed);
  assert.not.ok(raw.includes('secret body') || raw.includes('hidden@example.test'));
  assert.equal(await openContent(documents, secrets, sealed, at(BODY_RETENTION_MS - 1)), content);
});

test('at seven days the content can no longer be opened, and the sweep destroys its key', async () => {
  const sealed = await sealContent(documents, secrets, 'em_b', content, t0);
  assert.is(await openContent(documents, secrets, sealed, at(BODY_RETENTION_MS)), null);
  assert.ok((await shredExpiredContent(documents, at(BODY_RETENTION_MS))) >= 1);
  // Even a clock set back cannot bring it back: the key is gone.
  assert.is(await openContent(documents, secrets, sealed, t0), null);
});

test('a sealed body of an email that is still within retention survives the sweep', async () => {
  const young = await sealContent(documents, secrets, 'em_c', content, at(BODY_RETENTION_MS));
  await shredExpiredContent(documents, at(BODY_RETENTION_MS + 1000));
  assert.equal(await openContent(documents, secrets, young, at(BODY_RETENTION_MS + 1000)), content);
});

test('the retention part sweeps at start', async () => {
  const sealed = await sealContent(documents, secrets, 'em_d', content, t0);
  let shredded = -1;
  const retention = await startRetention({ documents, events, deliveryPolicy: DELIVERY_POLICY, now: () => at(BODY_RETENTION_MS + 1), onShredded: (n) => (shredded = n) });
  await retention.stop();
  assert.ok(shredded >= 1);
  assert.is(await openContent(documents, secrets, sealed, t0), null);
});

test('the sweep runs every step whether or not it is told what each removed', async () => {
  const sealed = await sealContent(documents, secrets, 'em_e', content, t0);
  const retention = await startRetention({ documents, events, deliveryPolicy: DELIVERY_POLICY, now: () => at(BODY_RETENTION_MS + 1) });
  await retention.stop();
  assert.is(await openContent(documents, secrets, sealed, t0), null);
});

test('a key taken over is renewed to seven days from the taker\'s time: a live one keeps its material, an expired one gets new', async () => {
  const first = await takeContentKey(documents, secrets, 'em_f', t0);
  assert.ok(first.made);
  const sealed = sealWith(first.key, content);
  const fourDays = 4 * 24 * 60 * 60 * 1000;
  const again = await takeContentKey(documents, secrets, 'em_f', at(fourDays));
  assert.not.ok(again.made);
  assert.is(again.key.key, first.key.key, 'a concurrent attempt may have sealed with it');
  assert.is(again.key.expiresAt, at(fourDays + BODY_RETENTION_MS).toISOString());
  assert.equal(await openContent(documents, secrets, sealed, at(BODY_RETENTION_MS + 1)), content);
  const late = await takeContentKey(documents, secrets, 'em_f', at(fourDays + BODY_RETENTION_MS + 1));
  assert.not.ok(late.made);
  assert.is.not(late.key.key, first.key.key, 'an expired key is not reused');
  assert.is(late.key.expiresAt, at(fourDays + 2 * BODY_RETENTION_MS + 1).toISOString());
});

test('a give-back removes a key its admission made; not one another attempt took over since', async () => {
  const made = await takeContentKey(documents, secrets, 'em_g', t0);
  assert.ok(await giveBackContentKey(documents, made));
  assert.is(await contentKeyState(documents, 'em_g', t0), 'gone');
  const mine = await takeContentKey(documents, secrets, 'em_h', t0);
  const theirs = await takeContentKey(documents, secrets, 'em_h', t0);
  assert.not.ok(await giveBackContentKey(documents, mine));
  assert.not.ok(await giveBackContentKey(documents, theirs), 'a key taken over is not given back');
  assert.is(await contentKeyState(documents, 'em_h', t0), 'live');
});

test('a key renewed after the sweep listed it as expired survives the sweep', async () => {
  await takeContentKey(documents, secrets, 'em_i', t0);
  const now = at(BODY_RETENTION_MS + 1);
  // The sweep lists the expired keys; an admission renews em_i before the sweep deletes it.
  const racing = new Proxy(documents, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'collection') return typeof value === 'function' ? value.bind(target) : value;
      return (name: string) => {
        const collection = target.collection<ContentKey>(name);
        if (name !== COLLECTIONS.contentKeys) return collection;
        return new Proxy(collection, {
          get(c, p) {
            const member = Reflect.get(c, p, c);
            if (p !== 'find') return typeof member === 'function' ? member.bind(c) : member;
            return async (...args: Parameters<Collection<ContentKey>['find']>) => {
              const found = await c.find(...args);
              if (found.some((k) => k._id === 'em_i')) await takeContentKey(documents, secrets, 'em_i', now);
              return found;
            };
          },
        });
      };
    },
  }) as DocumentStore;
  await shredExpiredContent(racing, now);
  assert.is(await contentKeyState(documents, 'em_i', now), 'live');
});

test.run();
