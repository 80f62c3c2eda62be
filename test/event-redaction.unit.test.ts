// The redaction rules of `relay events --redact` and `relay events export --redact`
// (apps/services/event-reading.ts, docs/analysing-events.md): address fields hashed whole
// whatever the address looks like, recipients' mailboxes become the hash of their address (the
// name goes with it), the sender's display name stays, and in any other text every address, a
// dot-atom local part with an apostrophe or a quoted local part included, is hashed whole.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { hashAddress, redactEvent } from '../apps/services/event-reading.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';

const test = suite('event redaction');

const event = (type: string, data: Record<string, unknown>): StoredEvent =>
  ({ id: 'e1', streamId: 'email-em_1', revision: 0, position: '1', type, data, metadata: {}, recordedAt: '2026-11-01T00:00:00.000Z' }) as StoredEvent;

const QUOTED = '"john doe"@example.org';
const APOSTROPHE = "o'brien@example.org";

test('address fields are hashed whole, a quoted local part and an apostrophe included', () => {
  const { data } = redactEvent(event('EmailSuppressed', {
    fromAddress: 'hello@acme.example', toAddresses: [QUOTED, APOSTROPHE], ccAddresses: ['"a@b"@example.net'],
    suppressedRecipients: [{ address: APOSTROPHE, reason: 'hard_bounce' }], content: { data: 'sealed' },
  }));
  assert.equal(data, {
    fromAddress: hashAddress('hello@acme.example'), toAddresses: [hashAddress(QUOTED), hashAddress(APOSTROPHE)], ccAddresses: [hashAddress('"a@b"@example.net')],
    suppressedRecipients: [{ address: hashAddress(APOSTROPHE), reason: 'hard_bounce' }], content: null,
  });
  assert.is(hashAddress('"a@b"@example.net').split('@')[1], 'example.net');
});

test('a recipient mailbox becomes the hash of its address; the sender keeps its name', () => {
  const { data } = redactEvent(event('EmailAccepted', {
    from: 'Acme Support <hello@acme.example>', to: [`John <${QUOTED}>`, APOSTROPHE], cc: [], replyTo: `"O'Brien, Pat" <${APOSTROPHE}>`,
  }));
  assert.equal(data, {
    from: `Acme Support <${hashAddress('hello@acme.example')}>`, to: [hashAddress(QUOTED), hashAddress(APOSTROPHE)], cc: [], replyTo: hashAddress(APOSTROPHE),
  });
});

test("the sender's own metadata, tags and headers: addresses in them redacted as text, their keys no address fields", () => {
  const { data } = redactEvent(event('EmailAccepted', {
    metadata: { address: '1 Main Street', to: 'the team', contact: `Pat <${APOSTROPHE}>`, [QUOTED]: 1 }, tags: { owner: 'ann@example.net' }, headers: { 'X-Ref': 'none' },
  }));
  assert.equal(data, {
    metadata: { address: '1 Main Street', to: 'the team', contact: `Pat <${hashAddress(APOSTROPHE)}>`, [hashAddress(QUOTED)]: 1 }, tags: { owner: hashAddress('ann@example.net') }, headers: { 'X-Ref': 'none' },
  });
});

test('in free text every address is hashed whole: quoted, with an apostrophe, in angle brackets or quotes, before a full stop', () => {
  const { data } = redactEvent(event('RecipientReported', {
    address: APOSTROPHE,
    diagnosticCode: `550 5.1.1 <${APOSTROPHE}>: unknown; also ${QUOTED}, 'ann@example.net' and bob@example.net.`,
  }));
  assert.is(data.address, hashAddress(APOSTROPHE));
  assert.is(
    data.diagnosticCode,
    `550 5.1.1 <${hashAddress(APOSTROPHE)}>: unknown; also ${hashAddress(QUOTED)}, '${hashAddress('ann@example.net')}' and ${hashAddress('bob@example.net')}.`,
  );
});

test.run();
