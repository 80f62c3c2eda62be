// `relay events export` upcasts every stream as the catalog says: an event of a version above
// the one this Relay writes becomes UnrecognizedEvent on a suppressions-<workspaceId> stream as
// on an email stream (never printed under its type with data a version-1 reader would misread),
// a version-1 suppression change is read as it is, and an event of a stream kind this version
// does not know is UnrecognizedEvent too rather than passed on as stored.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { asyncApiDocument } from '../apps/services/event-catalog.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { suppressionStreamId } from '../domain/suppressions/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted } from './support/email-events.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite('relay events export: upcasting of every stream');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-export-upcast-'));

test.after(() => rmSync(dataDir, { recursive: true, force: true }));

test('an event of a newer version becomes UnrecognizedEvent, on a suppression stream as on an email stream', async () => {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  const current = {
    workspaceId: 'ws_newer', address: 'b@example.org', reason: 'manual', by: { kind: 'user', userId: 'usr_1' }, occurredAt: '2026-11-01T00:00:00.000Z',
  };
  try {
    const meta = { correlationId: 'newer', causationId: 'newer', schemaVersion: 2 };
    await stores.events.append(emailStreamId('em_newer'), [{ id: randomUUID(), type: 'EmailAccepted', data: { ...accepted({ emailId: 'em_newer' }).data, reshaped: true }, metadata: meta }], { expectedRevision: 'no_stream' });
    await stores.events.append(suppressionStreamId('ws_newer'), [{
      id: randomUUID(), type: 'RecipientSuppressed',
      data: { workspaceId: 'ws_newer', addresses: ['a@example.org'], cause: 'bounce', at: '2026-11-01T00:00:00.000Z' }, metadata: meta,
    }, {
      id: randomUUID(), type: 'RecipientSuppressed', data: current, metadata: { ...meta, schemaVersion: 1 },
    }], { expectedRevision: 'no_stream' });
    await stores.events.append('newerkind-ws_newer', [{ id: randomUUID(), type: 'SomethingLater', data: { x: 1 }, metadata: meta }], { expectedRevision: 'no_stream' });
  } finally {
    await stores.close();
  }
  const catalog = asyncApiDocument() as { components: { messages: Record<string, { 'x-relay': { upcasting: string } }> } };
  assert.match(catalog.components.messages.RecipientSuppressed['x-relay'].upcasting, /becomes UnrecognizedEvent/);

  const run = await runRelay(['events', 'export'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, run.stderr);
  const [email, suppression, suppressionV1, unknownKind] = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.is(email.type, 'UnrecognizedEvent', 'the email stream\'s newer event');
  assert.is(suppression.type, 'UnrecognizedEvent', `the suppression stream's newer event is exported as ${suppression.type} ${JSON.stringify(suppression.data)}`);
  assert.equal(suppression.data, { type: 'RecipientSuppressed', schemaVersion: 2 });
  assert.equal([suppressionV1.type, suppressionV1.data], ['RecipientSuppressed', current], 'a version-1 change is read as stored');
  assert.equal([unknownKind.streamId, unknownKind.type, unknownKind.data], ['newerkind-ws_newer', 'UnrecognizedEvent', { type: 'SomethingLater' }]);
  // `relay events --upcast` reads the same way; without it, as stored.
  const upcast = await runRelay(['events', '--upcast', '--prefix', 'suppressions-'], { RELAY_DATA_DIR: dataDir });
  assert.equal(upcast.stdout.trim().split('\n').map((l) => JSON.parse(l).type), ['UnrecognizedEvent', 'RecipientSuppressed']);
  const raw = await runRelay(['events', '--prefix', 'suppressions-', '--limit', '1'], { RELAY_DATA_DIR: dataDir });
  assert.is(JSON.parse(raw.stdout).type, 'RecipientSuppressed');
});

test.run();
