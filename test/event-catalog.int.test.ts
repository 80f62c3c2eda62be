// The event catalog (apps/services/event-catalog.ts): GET /v1/asyncapi.json is a valid AsyncAPI 3
// document by the AsyncAPI project's own parser (@asyncapi/parser, which validates against the
// specification's JSON Schema and its rules), `relay events schema` prints the same, it covers
// every event type a stream can hold, and events appended through Relay's own code (a generated
// email history, the usage ledger, suppression changes made over the API) validate against their
// message's payload schema with an independent JSON Schema validator (Ajv).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Parser } from '@asyncapi/parser';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { UsageLedger } from '../apps/services/usage-ledger.ts';
import { EMAIL_SCHEMA_VERSIONS } from '../domain/email/upcast.ts';
import { SUPPRESSION_SCHEMA_VERSIONS } from '../domain/suppressions/events.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';
import { USAGE_SCHEMA_VERSIONS } from '../domain/usage/upcast.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { appendHistory, generateHistory } from './support/history.ts';
import { call, newCaller, workspaceWithProject } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite('event catalog (AsyncAPI)');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-catalog-'));
let t: TestApp;
let served: { components: { messages: Record<string, { payload: object; headers: object }> }; channels: { events: { messages: Record<string, unknown> } } };

test.before(async () => {
  t = await startTestApp({}, { dataDir });
  const response = await t.app.inject({ method: 'GET', url: '/v1/asyncapi.json' });
  assert.is(response.statusCode, 200, response.body);
  served = response.json();
});

test.after(async () => {
  await t.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test('GET /v1/asyncapi.json is valid AsyncAPI 3 by @asyncapi/parser, and relay events schema prints the same', async () => {
  const { document, diagnostics } = await new Parser().parse(JSON.stringify(served));
  // Spectral severities: 0 error, 1 warning, 2 information, 3 hint.
  const problems = diagnostics.filter((d) => d.severity <= 1);
  assert.equal(problems.map((d) => `${d.code}: ${d.message} at ${d.path.join('.')}`), []);
  assert.ok(document, 'the parser gave a document');
  assert.match(document!.version(), /^3\./);
  assert.is(document!.allMessages().length, Object.keys(served.components.messages).length);
  const printed = await runRelay(['events', 'schema'], { RELAY_DATA_DIR: dataDir });
  assert.is(printed.code, 0, printed.stderr);
  assert.equal(JSON.parse(printed.stdout), served);
});

test('it has an entry for every event type a stream can hold, with its version, upcasting and meaning', () => {
  const known = [...Object.keys(EMAIL_SCHEMA_VERSIONS), ...Object.keys(USAGE_SCHEMA_VERSIONS), ...Object.keys(SUPPRESSION_SCHEMA_VERSIONS)].sort();
  assert.equal(Object.keys(served.components.messages).sort(), known);
  assert.equal(Object.keys(served.channels.events.messages).sort(), known);
  const attempted = served.components.messages.DeliveryAttempted as unknown as { 'x-relay': { schemaVersion: number; upcasting: string; statuses: string[]; webhooks: string[] }; description: string };
  assert.is(attempted['x-relay'].schemaVersion, 1);
  assert.match(attempted['x-relay'].upcasting, /only one so far/);
  assert.ok(attempted['x-relay'].statuses.includes('hard_bounced'));
  assert.ok(attempted['x-relay'].webhooks.includes('email.bounced'));
  assert.match(attempted.description, /replaces the status/);
});

test('events appended by Relay validate against their message payload and headers', async () => {
  await appendHistory(t.stores.events, generateHistory({ emails: 300, projectId: 'prj_catalog', seed: 99 }));
  await new UsageLedger(t.stores.events).charge({
    workspaceId: 'ws_catalog', emailId: 'em_catalog', fingerprint: 'f', apiKeyId: 'key_catalog', developmentKey: true, recipients: 3, at: new Date(),
    origin: { correlationId: 'test', causationId: 'test' }, allowances: DEFAULT_ALLOWANCES,
  });
  const owner = await newCaller(t, 'catalog-owner@example.test');
  const { workspaceId } = await workspaceWithProject(t, owner);
  assert.is((await call(t, 'POST', `/v1/workspaces/${workspaceId}/suppressions`, { as: owner, body: { address: 'Blocked@Example.test' } })).statusCode, 201);
  assert.is((await call(t, 'DELETE', `/v1/workspaces/${workspaceId}/suppressions/blocked@example.test`, { as: owner })).statusCode, 200);

  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const validators = new Map(Object.entries(served.components.messages).map(([type, m]) => [type, { payload: ajv.compile(m.payload), headers: ajv.compile(m.headers) }]));
  const events = await t.stores.events.readAll({ maxCount: 100_000 });
  const seen = new Set<string>();
  for (const event of events) {
    const check = validators.get(event.type);
    assert.ok(check, `${event.type} is in the catalog`);
    seen.add(event.type);
    assert.ok(check!.payload(JSON.parse(JSON.stringify(event))), `${event.type} ${event.streamId}@${event.revision}: ${ajv.errorsText(check!.payload.errors)}`);
    assert.ok(check!.headers({ 'event-type': event.type, 'event-id': event.id }), ajv.errorsText(check!.headers.errors));
  }
  assert.equal([...seen].sort(), Object.keys(served.components.messages).sort(), 'a sample of every type was checked');
  const suppressed = events.find((e) => e.type === 'RecipientSuppressed')!;
  assert.equal(suppressed.data.by, { kind: 'user', userId: owner.userId });
  assert.is(suppressed.data.address, 'blocked@example.test');
  // A wrong event does not validate: the schemas constrain.
  const wrong = { ...events[0], data: { ...events[0].data, toAddresses: 'not a list' } };
  assert.not.ok(validators.get(events[0].type)!.payload(wrong));
});

test.run();
