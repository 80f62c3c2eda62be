// The forwarder's checkpoint: a lone forwarder, whose timed save and batch saves overlap under
// a steady stream of events, never reports a second forwarder; a real second one is reported.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startForwarder } from '../apps/pipeline/forwarder.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('forwarder checkpoint');
const dir = mkdtempSync(join(tmpdir(), 'relay-forwarder-'));
const events = new SqliteEventStore(join(dir, 'events.db'));
const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
const log = new SqliteLog(join(dir, 'log.db'));

test.after(async () => {
  await Promise.all([events.close(), documents.close(), log.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const append = (i: number) => events.append(`thing-${i}`, [{ id: randomUUID(), type: 'Happened', data: { i } }], { expectedRevision: 'any' });

test('one forwarder under a steady stream: every save succeeds, and the checkpoint ends at the last event', async () => {
  const errors: Error[] = [];
  const forwarder = await startForwarder({ events, log, documents, namespace: 'lone', checkpointEvery: 3, onError: (e) => errors.push(e) });
  let last = '';
  // For longer than the 250 ms timed save, with batch saves every 3 events in between.
  const until = Date.now() + 1_500;
  for (let i = 0; Date.now() < until; i++) {
    last = (await append(i)).position;
    if (i % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 7));
  }
  await waitUntil(() => forwarder.position() === last, 'the forwarder to publish the last event');
  await forwarder.stop();
  assert.equal(errors.map((e) => e.message), []);
  const checkpoint = await documents.collection<{ _id: string; position: string | null }>('checkpoints').get('forwarder:lone.events');
  assert.is(checkpoint?.position, last);
});

test('a second forwarder on the same namespace is reported', async () => {
  const errors: Error[] = [];
  const first = await startForwarder({ events, log, documents, namespace: 'twice', onError: (e) => errors.push(e) });
  const second = await startForwarder({ events, log, documents, namespace: 'twice', onError: (e) => errors.push(e) });
  for (let i = 0; i < 20; i++) await append(1_000 + i);
  await waitUntil(() => errors.length > 0, 'a forwarder to notice the other', 10_000);
  assert.match(errors[0].message, /second forwarder/);
  await Promise.allSettled([first.stop(), second.stop()]);
});

test.run();
