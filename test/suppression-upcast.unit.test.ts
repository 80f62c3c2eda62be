// The reading point of suppression streams (domain/suppressions/upcast.ts): a change of the
// version this Relay writes is read as stored; a version above it, or a type it does not know,
// becomes UnrecognizedEvent (with the type, and the version when the type is known), never
// read with today's schema.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SUPPRESSION_SCHEMA_VERSIONS, upcastSuppressionEvent } from '../domain/suppressions/upcast.ts';

const test = suite('suppression upcasting');

const data = { workspaceId: 'ws_1', address: 'a@example.org', reason: 'manual', by: { kind: 'user', userId: 'usr_1' }, occurredAt: '2026-11-01T00:00:00.000Z' };

test('given a change of the current version (or of none: before versions), then it is read as stored', () => {
  for (const type of ['RecipientSuppressed', 'RecipientUnsuppressed'] as const) {
    assert.equal(upcastSuppressionEvent({ type, data, metadata: { schemaVersion: SUPPRESSION_SCHEMA_VERSIONS[type] } }), { type, data });
    assert.equal(upcastSuppressionEvent({ type, data }), { type, data });
  }
});

test('given a newer version, then UnrecognizedEvent with its type and version', () => {
  const newer = SUPPRESSION_SCHEMA_VERSIONS.RecipientUnsuppressed + 1;
  assert.equal(upcastSuppressionEvent({ type: 'RecipientUnsuppressed', data, metadata: { schemaVersion: newer } }), {
    type: 'UnrecognizedEvent', data: { type: 'RecipientUnsuppressed', schemaVersion: newer },
  });
});

test('given a type this version does not know, then UnrecognizedEvent with its type', () => {
  assert.equal(upcastSuppressionEvent({ type: 'RecipientSuppressionExpired', data, metadata: { schemaVersion: 1 } }), {
    type: 'UnrecognizedEvent', data: { type: 'RecipientSuppressionExpired' },
  });
  assert.is(upcastSuppressionEvent({ type: 'constructor', data }).type, 'UnrecognizedEvent', 'no inherited property is a type');
});

test.run();
